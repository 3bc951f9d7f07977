"""The real Kubernetes control plane, built from upstream and run on loopback beside the simulator.

``build`` builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok at the
versions ``go/controlplane`` pins, cached outside the clone; ``cluster`` runs them as one local,
disposable cluster and writes its kubeconfig; ``pki`` makes its credentials. ``manage.py
realcluster`` (``ctrlscope realcluster``) is the command; the tests' ``realcluster`` marker and the
benchmarks use the same classes. Nothing here imports the runtime, the simulator or Django.
"""

from controllers.realcluster.build import Binaries, BuildError, ensure_built
from controllers.realcluster.cluster import ClusterError, RealCluster, write_kubeconfig

__all__ = ["Binaries", "BuildError", "ClusterError", "RealCluster", "ensure_built", "write_kubeconfig"]
