/**
 * A local OpenID provider standing in for Cognito's OAuth endpoints (the managed login's authorize,
 * token and JWKS endpoints), for `npm start` and the tests: `oidc-provider` (OpenID-certified), in
 * memory, with its users (one dev user by default, several for a team's tests) and its own sign-in page. The dashboard reaches it by discovery from its
 * issuer URL, exactly as it reaches a Cognito user pool on AWS: authorization code, PKCE (required
 * here, as the dashboard always sends it), state, nonce, a confidential client authenticated with
 * client_secret_basic, and RS256 ID tokens carrying `sub`, `email`, `email_verified` and `auth_time` (as Cognito's do),
 * verified against this provider's JWKS. A sign-in again (`prompt=login` or `max_age=0`, the dashboard's
 * before creating a key or changing auto top-up) shows the sign-in page even to a browser signed in here
 * (oidc-provider's own login policy), and its ID token's auth_time is that new sign-in's.
 *
 * Why not cognito-local: it emulates Cognito's user-pool API (InitiateAuth, SignUp... through the
 * AWS SDK) but not its OAuth 2.0 / OpenID endpoints (no /oauth2/authorize, no hosted sign-in page,
 * no authorization code flow), which are the only part of Cognito the dashboard uses. A certified
 * OpenID provider exercises the dashboard's real code path; cognito-local would need a second one.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair } from 'jose';

export interface LocalOidcOptions {
  /** Where the dashboard's callback is (`<origin>/dashboard/callback`): the client's redirect URIs. */
  redirectUris: string[];
  host?: string;
  /** 0 (the default) picks a free port. */
  port?: number;
  clientId?: string;
  clientSecret?: string;
  /** The dev user; default dev@example.com / "dev". */
  user?: { email: string; password: string; subject?: string };
  /** More people who can sign in (a team: an owner inviting a developer), each with its own `sub`. */
  users?: { email: string; password: string; subject?: string }[];
}

type LocalUser = { email: string; password: string; subject: string };

export interface RunningLocalOidc {
  /** The issuer URL (what OIDC_ISSUER is set to). */
  issuer: string;
  clientId: string;
  clientSecret: string;
  user: LocalUser;
  /** Every user, the dev user first. */
  users: LocalUser[];
  close(): Promise<void>;
}

/** The little of oidc-provider's API used here (the package ships no types). */
interface Interaction {
  uid: string;
  prompt: { name: string };
  params: Record<string, unknown>;
  session?: { accountId?: string };
}
interface GrantInstance {
  addOIDCScope(scope: string): void;
  save(): Promise<string>;
}
interface ProviderInstance {
  callback(): (req: IncomingMessage, res: ServerResponse) => void;
  interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<Interaction>;
  interactionFinished(
    req: IncomingMessage,
    res: ServerResponse,
    result: object,
    options?: object,
  ): Promise<void>;
  Grant: new (init: { accountId: string; clientId: string }) => GrantInstance;
  Session: {
    get(ctx: { req: IncomingMessage; res: ServerResponse }): Promise<{ destroy(): Promise<void> }>;
  };
}
type ProviderClass = new (issuer: string, configuration: object) => ProviderInstance;

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function signInPage(uid: string, message?: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign in (local)</title></head>
<body><main><h1>Sign in</h1><p>Local identity provider (stands in for Amazon Cognito's managed login).</p>
${message ? `<p role="alert">${escapeHtml(message)}</p>` : ''}
<form method="post" action="/interaction/${escapeHtml(uid)}/login">
<label>Email <input name="email" type="email" autocomplete="username" required></label>
<label>Password <input name="password" type="password" autocomplete="current-password" required></label>
<button type="submit">Sign in</button></form></main></body></html>`;
}

/**
 * What oidc-provider warns of that a local stand-in is by design: an in-memory store, and a Node.js
 * older than its supported 22 (`npm start` runs on 20.19+). Every other warning of it is shown.
 */
const EXPECTED_WARNINGS = [/^oidc-provider WARNING: Unsupported runtime/, /in-memory adapter is used/];
function withoutExpectedWarnings(): () => void {
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    const text = args.map(String).join(' ');
    if (!EXPECTED_WARNINGS.some((pattern) => pattern.test(text))) warn(...args);
  };
  return () => {
    console.warn = warn;
  };
}
async function quietly<T>(run: () => Promise<T>): Promise<T> {
  const restore = withoutExpectedWarnings();
  try {
    return await run();
  } finally {
    restore();
  }
}
function quietlySync<T>(run: () => T): T {
  const restore = withoutExpectedWarnings();
  try {
    return run();
  } finally {
    restore();
  }
}

async function formOf(req: IncomingMessage): Promise<URLSearchParams> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return new URLSearchParams(Buffer.concat(parts).toString('utf8'));
}

/**
 * Cognito's managed login sign-out (`GET /logout?client_id=...&logout_uri=...`): ends this browser's
 * session at the provider and redirects to `logout_uri` when it is one of the client's allowed
 * sign-out URLs (the dashboard's home beside each callback, as the CDK app client lists it); 400 else.
 */
async function signOut(
  provider: ProviderInstance,
  url: URL,
  req: IncomingMessage,
  res: ServerResponse,
  allowed: { clientId: string; logoutUris: string[] },
) {
  const returnTo = url.searchParams.get('logout_uri') ?? '';
  if (url.searchParams.get('client_id') !== allowed.clientId || !allowed.logoutUris.includes(returnTo)) {
    res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' });
    return void res.end('logout: unknown client_id or a logout_uri the client does not allow');
  }
  await (await provider.Session.get({ req, res })).destroy();
  res.writeHead(302, { location: returnTo, 'cache-control': 'no-store' });
  res.end();
}

export async function startLocalOidc(options: LocalOidcOptions): Promise<RunningLocalOidc> {
  const user = {
    email: options.user?.email ?? 'dev@example.com',
    password: options.user?.password ?? 'dev',
    subject: options.user?.subject ?? 'local-dev-user',
  };
  const users: LocalUser[] = [
    user,
    ...(options.users ?? []).map((other, i) => ({
      ...other,
      subject: other.subject ?? `local-user-${i + 2}`,
    })),
  ];
  const clientId = options.clientId ?? 'dashboard-local';
  const clientSecret = options.clientSecret ?? randomBytes(24).toString('base64url');
  const host = options.host ?? '127.0.0.1';

  // The issuer names the port, so the server listens first and the provider is made once it is known.
  let provider: ProviderInstance | undefined;
  let handle: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const server = createServer((req, res) => {
    serve(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`local OpenID provider: ${(error as Error).message}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, host, resolve));
  const issuer = `http://${host}:${(server.address() as AddressInfo).port}`;

  // Sign-in: a user's email and password; then consent is granted at once (a first-party
  // client, as Cognito's managed login asks none), the scopes the dashboard asked for.
  async function serve(req: IncomingMessage, res: ServerResponse) {
    if (!provider || !handle) throw new Error('not ready');
    const url = new URL(req.url ?? '/', issuer);
    if (url.pathname === '/logout' && req.method === 'GET')
      return signOut(provider, url, req, res, {
        clientId,
        logoutUris: options.redirectUris.map((uri) => new URL('./', uri).href),
      });
    const match = /^\/interaction\/([^/]+)(\/login)?$/.exec(url.pathname);
    if (!match) return handle(req, res);
    const details = await provider.interactionDetails(req, res);
    if (details.prompt.name === 'login' && req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      return void res.end(signInPage(details.uid));
    }
    let accountId = details.session?.accountId;
    if (details.prompt.name === 'login') {
      const form = await formOf(req);
      const signedIn = users.find(
        (u) => u.email === form.get('email') && u.password === form.get('password'),
      );
      if (!signedIn) {
        res.writeHead(401, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
        return void res.end(signInPage(details.uid, 'Wrong email or password.'));
      }
      accountId = signedIn.subject;
    }
    if (!accountId) throw new Error('no signed-in user for this interaction');
    const grant = new provider.Grant({ accountId, clientId: String(details.params.client_id) });
    grant.addOIDCScope(String(details.params.scope ?? 'openid'));
    const result = { login: { accountId }, consent: { grantId: await grant.save() } };
    await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
  }

  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const signingKey = {
    ...(await exportJWK(privateKey)),
    kid: randomBytes(8).toString('hex'),
    alg: 'RS256',
    use: 'sig',
  };
  // A module name held in a variable: oidc-provider has no type declarations to resolve.
  const moduleName = 'oidc-provider';
  const { Provider } = await quietly(() => import(moduleName) as Promise<{ Provider: ProviderClass }>);
  provider = quietlySync(
    () =>
      new Provider(issuer, {
        clients: [
          {
            client_id: clientId,
            client_secret: clientSecret,
            redirect_uris: options.redirectUris,
            grant_types: ['authorization_code'],
            response_types: ['code'],
            token_endpoint_auth_method: 'client_secret_basic',
            // Every ID token carries auth_time, as Cognito's do (not only when max_age was sent).
            require_auth_time: true,
          },
        ],
        jwks: { keys: [signingKey] },
        cookies: { keys: [randomBytes(32).toString('hex')] },
        pkce: { required: () => true },
        ttl: {
          AccessToken: 3600,
          AuthorizationCode: 60,
          IdToken: 3600,
          Grant: 3600,
          Interaction: 600,
          Session: 3600,
        },
        features: { devInteractions: { enabled: false } },
        interactions: {
          url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}`,
        },
        claims: { openid: ['sub'], email: ['email', 'email_verified'] },
        // Cognito's ID tokens carry the email: the claims of the granted scopes go in the ID token too.
        conformIdTokenClaims: false,
        findAccount: async (_ctx: unknown, sub: string) => {
          const found = users.find((u) => u.subject === sub);
          return found
            ? { accountId: sub, claims: async () => ({ sub, email: found.email, email_verified: true }) }
            : undefined;
        },
      }),
  );
  handle = provider.callback();

  return {
    issuer,
    clientId,
    clientSecret,
    user,
    users,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
