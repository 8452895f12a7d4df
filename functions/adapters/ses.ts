/**
 * Amazon SES v2's SendEmail spoken directly, as secrets-manager.ts speaks Secrets Manager: its
 * REST-JSON protocol (`POST /v2/email/outbound-emails`, a JSON body, `{"MessageId": "..."}` back) to
 * `email.<region>.amazonaws.com`, signed with `aws4` (SigV4, service `ses`) with the environment's
 * credentials (where Lambda puts the function role's), over Node's kept-alive connections
 * (origin.ts): the function bundle carries no SDK client. Bounded as the Secrets Manager call: 1 s to
 * connect, 5 s for the answer, 3 attempts, network failures, 5xx and throttling (429) retried with
 * full-jitter backoff, nothing else. A failed call is an Error named by SES's code (MessageRejected,
 * AccessDeniedException...). Locally the endpoint is the SES stand-in (lib/local/ses.ts).
 */
import aws4 from 'aws4';
import type { WireCredentials } from './dynamodb/connection.js';
import { Origin } from './origin.js';

const CONNECT_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 5_000;
const MAX_ATTEMPTS = 3;
const BACKOFF_BASE_MS = 100;
const MAX_ANSWER_BYTES = 64 * 1024;
const PATH = '/v2/email/outbound-emails';

const origins = new Map<string, Origin>();

class SesError extends Error {
  constructor(
    name: string,
    message: string,
    readonly retryable: boolean,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = name;
  }
}

/** `url`: `https://email.<region>.amazonaws.com` (the SES stand-in locally). */
export interface SesWhere {
  url: string;
  region: string;
  credentials: () => Promise<WireCredentials> | WireCredentials;
}

export interface Email {
  from: string;
  to: string;
  subject: string;
  text: string;
}

/** The body SendEmail takes for a plain-text message (a "Simple" message: SES assembles the MIME). */
function sendEmailBody(email: Email): string {
  return JSON.stringify({
    FromEmailAddress: email.from,
    Destination: { ToAddresses: [email.to] },
    Content: {
      Simple: {
        Subject: { Data: email.subject, Charset: 'UTF-8' },
        Body: { Text: { Data: email.text, Charset: 'UTF-8' } },
      },
    },
  });
}

/** Sends one e-mail; resolves with SES's MessageId once SES accepted it. */
export async function sendEmail(where: SesWhere, email: Email): Promise<string> {
  const body = sendEmailBody(email);
  for (let attempt = 1; ; attempt++) {
    try {
      const text = await exchange(where, body);
      const id = (JSON.parse(text) as { MessageId?: unknown }).MessageId;
      if (typeof id !== 'string') throw new SesError('InvalidResponse', 'no MessageId', false);
      return id;
    } catch (error) {
      if (!(error instanceof SesError && error.retryable) || attempt >= MAX_ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * BACKOFF_BASE_MS * 2 ** attempt));
    }
  }
}

async function exchange(where: SesWhere, body: string): Promise<string> {
  let origin = origins.get(where.url);
  if (!origin) {
    origin = new Origin(where.url, {
      connectTimeoutMs: CONNECT_TIMEOUT_MS,
      maxResponseBytes: MAX_ANSWER_BYTES,
    });
    origins.set(where.url, origin);
  }
  const { host } = new URL(where.url);
  const signed = aws4.sign(
    {
      service: 'ses',
      region: where.region,
      method: 'POST',
      host,
      path: PATH,
      headers: { 'content-type': 'application/json' },
      body,
    },
    await where.credentials(),
  );
  const answerOf = origin;
  const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    let status = 0;
    const pieces: Buffer[] = [];
    const timer = setTimeout(
      () => abort(new SesError('TimeoutError', 'no answer in time', true)),
      REQUEST_TIMEOUT_MS,
    );
    const abort = answerOf.exchange(
      { path: PATH, method: 'POST', headers: signed.headers as Record<string, string>, body },
      {
        head(code, headers) {
          status = code;
          timer.refresh();
          answerOf.answered(headers['keep-alive']);
        },
        piece(bytes) {
          timer.refresh();
          pieces.push(bytes);
        },
        end() {
          clearTimeout(timer);
          resolve({ status, text: Buffer.concat(pieces).toString('utf8') });
        },
        fail(error) {
          clearTimeout(timer);
          reject(
            error instanceof SesError
              ? error
              : new SesError('NetworkingError', error.message, true, { cause: error }),
          );
        },
      },
    );
  });
  if (status === 200) return text;
  throw answerError(status, text);
}

/** SES's error answer: an `x-amzn-errortype`-style JSON `{"__type"?, "message"}` with its status. */
function answerError(status: number, text: string): SesError {
  let code = `HTTP${status}`;
  let message = text.slice(0, 300);
  try {
    const parsed = JSON.parse(text) as { __type?: unknown; message?: unknown; Message?: unknown };
    if (typeof parsed.__type === 'string') code = parsed.__type.split('#').pop() || code;
    const said = parsed.message ?? parsed.Message;
    if (typeof said === 'string') message = said;
  } catch {
    // Not JSON: the status and the start of the text say enough.
  }
  return new SesError(code, message, status >= 500 || status === 429);
}
