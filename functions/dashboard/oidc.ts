/**
 * Sign-in through an OpenID provider: the authorization code flow of a confidential client with PKCE
 * (S256), state and nonce, on `openid-client` (a maintained, certified relying-party library). The
 * provider is found by discovery from its issuer URL: Cognito's user pool on AWS, the local provider
 * (lib/local/oidc.ts) locally, by the same code. The ID token's signature is verified against the
 * issuer's JWKS (enableNonRepudiationChecks; without it openid-client relies on the TLS connection to
 * the token endpoint alone), with its issuer, audience, expiry and nonce.
 */
import * as client from 'openid-client';
import type { OidcSettings } from './config.js';

/** What the browser keeps (in the sign-in cookie) between the redirect to the provider and its callback. */
export interface SignInChecks {
  codeVerifier: string;
  state: string;
  nonce: string;
  /**
   * A fresh sign-in (asked for before creating a key or changing auto top-up): when its redirect was
   * made (epoch seconds). The callback accepts only an ID token whose `auth_time` is not older.
   */
  freshSince?: number;
  /** Where a fresh sign-in sends the browser back to (a dashboard path), to redo what it asked for. */
  returnTo?: string;
  /** An invitation being accepted (invite-routes.tsx): the callback accepts it as the signed-in person. */
  invite?: { accountId: string; invitationId: string; token: string };
}

interface SignedInUser {
  /** The provider's `sub`: stable per user (Cognito: a UUID). */
  subject: string;
  email?: string;
  /** The ID token's `email_verified` (Cognito's is a boolean): an invitation is accepted only with it true. */
  emailVerified?: boolean;
  /** The ID token's `auth_time`: when the user last authenticated at the provider (epoch seconds). */
  authTime?: number;
}

/** The OpenID boundary the dashboard depends on; unit tests stand in for it. */
export interface OidcClient {
  /**
   * A new sign-in: where to send the browser, and the checks its callback must pass. `fresh`: the user
   * must authenticate again even with a live session at the provider (`prompt=login`, `max_age=0`).
   */
  begin(options?: { fresh?: boolean }): Promise<{ url: URL; checks: SignInChecks }>;
  /** The callback (its full public URL with the query), exchanged for a verified ID token's subject. */
  finish(callbackUrl: URL, checks: SignInChecks): Promise<SignedInUser>;
  /**
   * Where the browser ends the provider's own sign-in at sign-out, then comes back to the dashboard's
   * home (the app client's allowed sign-out URL): Cognito's managed login `/logout` with `client_id`
   * and `logout_uri`, on the host of its authorize endpoint. Without it the provider's session would
   * sign the next person at that browser straight back in.
   */
  signOutUrl?(): URL;
}

/** The sign-in failed at the provider or its checks (state, nonce, PKCE, signature): start again. */
export class SignInError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SignInError';
  }
}

const SCOPE = 'openid email';

/** Plain http is allowed only to a provider on this machine (the local one): never on AWS. */
function onThisMachine(issuer: URL): boolean {
  return issuer.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(issuer.hostname);
}

export async function openIdClient(
  settings: OidcSettings,
  options: { fetch?: client.CustomFetch } = {},
): Promise<OidcClient> {
  const issuer = new URL(settings.issuer);
  const config = await client.discovery(
    issuer,
    settings.clientId,
    { client_secret: settings.clientSecret },
    client.ClientSecretBasic(settings.clientSecret),
    {
      execute: [
        client.enableNonRepudiationChecks,
        ...(onThisMachine(issuer) ? [client.allowInsecureRequests] : []),
      ],
      timeout: 5,
      ...(options.fetch ? { [client.customFetch]: options.fetch } : {}),
    },
  );
  return {
    signOutUrl() {
      const url = new URL('/logout', config.serverMetadata().authorization_endpoint ?? settings.issuer);
      url.searchParams.set('client_id', settings.clientId);
      url.searchParams.set('logout_uri', new URL('./', settings.redirectUri).href);
      return url;
    },
    async begin(options = {}) {
      const checks = {
        codeVerifier: client.randomPKCECodeVerifier(),
        state: client.randomState(),
        nonce: client.randomNonce(),
      };
      const url = client.buildAuthorizationUrl(config, {
        redirect_uri: settings.redirectUri,
        response_type: 'code',
        scope: SCOPE,
        code_challenge: await client.calculatePKCECodeChallenge(checks.codeVerifier),
        code_challenge_method: 'S256',
        state: checks.state,
        nonce: checks.nonce,
        // Cognito's managed login documents `prompt=login` (sign in again despite its session cookie);
        // `max_age=0` is the OpenID Connect way, honoured by the local provider. Neither is trusted
        // alone: the callback checks the ID token's auth_time itself.
        ...(options.fresh ? { prompt: 'login', max_age: '0' } : {}),
      });
      return { url, checks };
    },
    async finish(callbackUrl, checks) {
      let claims: client.IDToken | undefined;
      try {
        const tokens = await client.authorizationCodeGrant(config, callbackUrl, {
          pkceCodeVerifier: checks.codeVerifier,
          expectedState: checks.state,
          expectedNonce: checks.nonce,
          idTokenExpected: true,
        });
        claims = tokens.claims();
      } catch (error) {
        throw new SignInError(`sign-in failed: ${(error as Error).message}`, { cause: error });
      }
      if (!claims?.sub) throw new SignInError('sign-in failed: the ID token has no subject');
      return {
        subject: claims.sub,
        ...(typeof claims.email === 'string' ? { email: claims.email } : {}),
        ...(claims.email_verified === true || claims.email_verified === 'true'
          ? { emailVerified: true }
          : {}),
        ...(typeof claims.auth_time === 'number' ? { authTime: claims.auth_time } : {}),
      };
    },
  };
}
