// A real OpenID Connect provider for the SSO test (tests/dashboard/test_sso_oidc.py): panva's
// oidc-provider, installed by the test from package-lock.json into a cache outside the repo, with
// its development login and consent pages (any password; the login names an account below).
//
//   node provider.mjs PORT CLIENT_ID CLIENT_SECRET REDIRECT_URI ACCOUNTS_FILE
// ACCOUNTS_FILE: {"alice": {"email": "alice@example.test", "groups": ["ops"]}, ...}, read again on
// every lookup, so a test can change someone's groups at the "identity provider".
import { readFileSync } from 'node:fs';

import Provider from 'oidc-provider';

const [port, clientId, clientSecret, redirectUri, accountsFile] = process.argv.slice(2);
const accounts = () => JSON.parse(readFileSync(accountsFile, 'utf8'));
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code'],
    response_types: ['code'],
  }],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username', 'name'],
    groups: ['groups'],
  },
  cookies: { keys: ['ctrlscope-test-only-cookie-key'] },
  async findAccount(ctx, sub) {
    if (!accounts()[sub]) return undefined;
    return {
      accountId: sub,
      async claims() {
        const account = accounts()[sub];
        return {
          sub,
          email: account.email,
          email_verified: true,
          preferred_username: sub,
          name: sub,
          groups: account.groups,
        };
      },
    };
  },
});

provider.listen(Number(port), '127.0.0.1', () => {
  console.log(`oidc-provider listening on ${issuer}`);
});
