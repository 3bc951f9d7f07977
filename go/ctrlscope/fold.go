package ctrlscope

// The queue item model (protocol/README.md §5.2): where each key of a workqueue is, built from the
// queue topic's own records by one fold that every publisher shares (controllers/schema.py
// fold_queue_op; protocol/vectors/queue fix it).

import "strconv"

// QueueItem is one key's state value on a queue topic.
type QueueItem struct {
	S        QueueItemState // "" only transiently, inside the fold
	Since    float64        // wall ms it entered S (0: not set)
	ReadyAt  float64        // wall ms a delayed add fires (0: none pending)
	Dirty    bool           // added again while processing
	Requeues int            // the rate limiter's count
}

// MarshalJSON writes the protocol's shape: {"requeues", "s", "since", "ready_at", "dirty"}, the
// optional fields only when set.
func (q QueueItem) MarshalJSON() ([]byte, error) { return q.appendJSON(nil), nil }

func (q QueueItem) appendJSON(b []byte) []byte {
	b = append(b, `{"requeues":`...)
	b = strconv.AppendInt(b, int64(q.Requeues), 10)
	if q.S != "" {
		b = append(b, `,"s":`...)
		b = appendString(b, string(q.S))
	}
	if q.Since != 0 {
		b = append(b, `,"since":`...)
		b = appendFloat(b, q.Since)
	}
	if q.ReadyAt != 0 {
		b = append(b, `,"ready_at":`...)
		b = appendFloat(b, q.ReadyAt)
	}
	if q.Dirty {
		b = append(b, `,"dirty":true`...)
	}
	return append(b, '}')
}

// FoldQueueOp is a key's next item after one queue record at nowMs; ok is false when the key is
// gone (nothing left to track). prev is nil for a key the state does not hold. delay (seconds)
// and requeues are the record's optional fields.
func FoldQueueOp(prev *QueueItem, op QueueOp, nowMs float64, delay *float64, requeues *int) (item QueueItem, ok bool) {
	if prev != nil {
		item = *prev
	}
	if item.ReadyAt != 0 && item.ReadyAt <= nowMs {
		item.ReadyAt = 0 // the delayed add has fired (this record may be it)
	}
	switch op {
	case QueueOpAdd, QueueOpRequeue:
		// since: when the key entered the FIFO; an add of a key already queued does not move it.
		since := nowMs
		if item.S == QueueItemStateQueued && item.Since != 0 {
			since = item.Since
		}
		item.S, item.Since = QueueItemStateQueued, since
	case QueueOpDefer:
		item.Dirty = true
	case QueueOpGet:
		item = QueueItem{Requeues: item.Requeues, S: QueueItemStateProcessing, Since: nowMs, ReadyAt: item.ReadyAt}
	case QueueOpAddAfter, QueueOpAddRateLimited:
		if delay != nil && *delay > 0 { // a zero delay adds at once: that add is its own record
			// A key already waiting keeps the earlier of its two ready times, as client-go's
			// delaying queue does; a queued or processing key stays where it is.
			readyAt := nowMs + *delay*1000
			if !(item.ReadyAt != 0 && nowMs < item.ReadyAt && item.ReadyAt < readyAt) {
				item.ReadyAt = readyAt
			}
			if item.S != QueueItemStateQueued && item.S != QueueItemStateProcessing {
				item.S = QueueItemStateWaiting
			}
		}
		if requeues != nil { // the limiter's count, already including this retry
			item.Requeues = *requeues
		}
	case QueueOpForget:
		item.Requeues = 0
	case QueueOpDone:
		switch {
		case item.Dirty:
			item.Dirty = false
			item.S, item.Since = QueueItemStateQueued, nowMs
		case item.ReadyAt > nowMs:
			item.S = QueueItemStateWaiting
		case item.Requeues > 0:
			item = QueueItem{Requeues: item.Requeues, S: QueueItemStateIdle}
		default:
			return QueueItem{}, false
		}
	}
	if prev == nil && item.S == "" {
		return QueueItem{}, false // an op on a key the state never held that puts it nowhere
	}
	return item, true
}
