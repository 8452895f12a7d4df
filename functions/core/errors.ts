/**
 * HTTP errors with the OpenAI error shape `{error: {message, type, param, code}}` (so that the official
 * SDKs raise their typed errors), except 402, which uses the product's flat body. Every error knows its
 * status and how to serialise itself.
 */

export class HttpError extends Error {
  readonly statusCode: number;
  readonly type: string;
  readonly param: string | null;
  readonly code: string | null;
  readonly headers: Record<string, string>;

  constructor(
    statusCode: number,
    message: string,
    details: { type: string; param?: string | null; code?: string | null; headers?: Record<string, string> },
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'HttpError';
    this.statusCode = statusCode;
    this.type = details.type;
    this.param = details.param ?? null;
    this.code = details.code ?? null;
    this.headers = details.headers ?? {};
  }

  toBody(): unknown {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export class BadRequestError extends HttpError {
  constructor(
    message: string,
    param: string | null = null,
    code: string | null = 'invalid_request',
    options?: ErrorOptions,
  ) {
    super(400, message, { type: 'invalid_request_error', param, code }, options);
    this.name = 'BadRequestError';
  }
}

export class AuthenticationError extends HttpError {
  constructor(message: string, code = 'invalid_api_key') {
    super(401, message, { type: 'authentication_error', code });
    this.name = 'AuthenticationError';
  }
}

export class PermissionDeniedError extends HttpError {
  constructor(message: string, code: string) {
    super(403, message, { type: 'permission_error', code });
    this.name = 'PermissionDeniedError';
  }
}

export class NotFoundError extends HttpError {
  constructor(message: string) {
    super(404, message, { type: 'invalid_request_error', code: 'not_found' });
    this.name = 'NotFoundError';
  }
}

export class MethodNotAllowedError extends HttpError {
  constructor(method: string, allowed: readonly string[]) {
    super(405, `Method ${method} is not allowed here; use ${allowed.join(', ')}`, {
      type: 'invalid_request_error',
      code: 'method_not_allowed',
      headers: { allow: allowed.join(', ') },
    });
    this.name = 'MethodNotAllowedError';
  }
}

/** 402 with the spec's flat body `{error, balance, message, topUpUrl}`. */
export class InsufficientCreditsError extends HttpError {
  readonly balanceUsd: string;
  readonly topUpUrl: string;

  constructor(balanceUsd: string, topUpUrl: string, options: { held?: boolean } = {}) {
    super(
      402,
      options.held
        ? `Your available credit is held by requests in flight (balance ${balanceUsd} USD). Retry when they finish, or buy credits at ${topUpUrl}.`
        : balanceUsd.startsWith('-')
          ? `Your credit balance is ${balanceUsd} USD: the last requests cost more than it held. Buy credits at ${topUpUrl} to continue.`
          : `Your credit balance is empty. Buy credits at ${topUpUrl} to continue.`,
      {
        type: 'insufficient_credits',
        code: 'insufficient_credits',
        // The flat body is out of an SDK's reach (it shows the status and `error`); headers are not
        // (`error.headers`): the top-up page as a payment link (RFC 8288) and the balance in USD.
        headers: { link: `<${topUpUrl}>; rel="payment"`, 'x-credit-balance': balanceUsd },
      },
    );
    this.name = 'InsufficientCreditsError';
    this.balanceUsd = balanceUsd;
    this.topUpUrl = topUpUrl;
  }

  override toBody(): unknown {
    // balance is the one money value that becomes a JSON number here, at the edge (the product's 402 body).
    return {
      error: 'Insufficient credits',
      balance: Number(this.balanceUsd),
      message: this.message,
      topUpUrl: this.topUpUrl,
    };
  }
}

/**
 * The key's daily spend cap is reached (core/store.ts, "KEY DAILY CAPS"): 402, with the same flat
 * body as InsufficientCreditsError. Why 402 and not 429: 429 is what clients (the OpenAI SDKs, and
 * most agents) retry by themselves with backoff, and stays reserved for rate limits; a spend limit is
 * not lifted by retrying within seconds. OpenRouter answers an exhausted key limit with 402 too
 * (saying in its error which limit, `openrouter_key_limit`), and a client that handles this service's
 * 402 already reads this body: `error` says which limit ("Key daily spend cap reached", where the
 * account's is "Insufficient credits"), `message` the cap, that it resets at 00:00 UTC and when next
 * (ISO) and where the cap is raised or removed (the dashboard's Settings → API page, `urls.caps`;
 * not Billing: credit does not lift a cap), `balance` is still the account's balance (it is not what
 * stops the request), and `topUpUrl` the same field as the credit 402's. The OpenAI SDKs do not retry
 * a 402.
 */
export class KeyDailyCapError extends HttpError {
  readonly balanceUsd: string;
  readonly topUpUrl: string;

  constructor(
    capUsd: string,
    resetsAt: string,
    balanceUsd: string,
    urls: { topUp: string; caps?: string | undefined },
  ) {
    const topUpUrl = urls.topUp;
    const where = urls.caps ? `at ${urls.caps}` : "in the dashboard's Settings → API";
    super(
      402,
      `This API key's daily spend cap of ${capUsd} USD is reached. It resets at 00:00 UTC (next: ${resetsAt}). Raise or remove the cap ${where}, or use another key.`,
      {
        type: 'insufficient_credits',
        code: 'key_daily_cap_reached',
        headers: {
          link: `<${topUpUrl}>; rel="payment"`,
          'x-credit-balance': balanceUsd,
          'x-key-limit-reset': resetsAt,
        },
      },
    );
    this.name = 'KeyDailyCapError';
    this.balanceUsd = balanceUsd;
    this.topUpUrl = topUpUrl;
  }

  override toBody(): unknown {
    return {
      error: 'Key daily spend cap reached',
      balance: Number(this.balanceUsd),
      message: this.message,
      topUpUrl: this.topUpUrl,
    };
  }
}

export class UpstreamError extends HttpError {
  constructor(
    message = 'The upstream model provider failed to answer. Retry with exponential backoff.',
    options?: ErrorOptions,
  ) {
    super(502, message, { type: 'upstream_error', code: 'upstream_error' }, options);
    this.name = 'UpstreamError';
  }
}

class InternalError extends HttpError {
  constructor(options?: ErrorOptions) {
    super(
      500,
      'The server had an error while processing your request. Retry with exponential backoff.',
      {
        type: 'server_error',
        code: 'internal_error',
      },
      options,
    );
    this.name = 'InternalError';
  }
}

/** The database (or another dependency) did not answer in time before anything was spent: retry soon. */
export class ServiceUnavailableError extends HttpError {
  constructor(options?: ErrorOptions) {
    super(
      503,
      'The service is temporarily unavailable. Nothing was charged; retry with exponential backoff.',
      { type: 'server_error', code: 'service_unavailable', headers: { 'retry-after': '1' } },
      options,
    );
    this.name = 'ServiceUnavailableError';
  }
}

/**
 * A `stream: false` reply that could not be completed before CloudFront's origin read timeout: the
 * upstream is abandoned and nothing is charged. `x-should-retry: false` stops the OpenAI SDKs from
 * retrying a request that would time out again.
 */
export class GatewayTimeoutError extends HttpError {
  constructor(seconds: number, options?: ErrorOptions) {
    super(
      504,
      `The model did not finish within ${seconds} s, the limit for a non-streaming request. Nothing was charged; use "stream": true for long generations.`,
      { type: 'timeout', code: 'upstream_timeout', headers: { 'x-should-retry': 'false' } },
      options,
    );
    this.name = 'GatewayTimeoutError';
  }
}

/** An account the store does not have: not an HTTP answer (the caller decides what it means). */
export class AccountNotFoundError extends Error {
  constructor(accountId: string) {
    super(`account ${accountId} does not exist`);
    this.name = 'AccountNotFoundError';
  }
}

/** An account id already taken (Store.createAccount). */
export class AccountExistsError extends Error {
  constructor(accountId: string) {
    super(`account ${accountId} already exists`);
    this.name = 'AccountExistsError';
  }
}

/** A key that is not there, or not of the account that asked (Store.setKeyDailyCap): not an HTTP answer. */
export class KeyNotFoundError extends Error {
  constructor(keyId: string) {
    super(`no key ${keyId} on this account`);
    this.name = 'KeyNotFoundError';
  }
}

/** A key refused because its account has `max` active keys already (Store.createKey): not an HTTP answer. */
export class TooManyKeysError extends Error {
  constructor(
    accountId: string,
    readonly max: number,
  ) {
    super(`account ${accountId} has ${max} active keys already`);
    this.name = 'TooManyKeysError';
  }
}

/** Anything that is not an HttpError becomes a generic 500; its detail never reaches the client. */
export function toHttpError(error: unknown): HttpError {
  return error instanceof HttpError ? error : new InternalError({ cause: error });
}
