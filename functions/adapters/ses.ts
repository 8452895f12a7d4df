/**
 * Amazon SES v2's SendEmail spoken directly, as secrets-manager.ts speaks Secrets Manager (both through
 * aws-call.ts): its REST-JSON protocol (`POST /v2/email/outbound-emails`, a JSON body,
 * `{"MessageId": "..."}` back) to `email.<region>.amazonaws.com`, SigV4-signed for service `ses`:
 * the function bundle carries no SDK client. Bounded: 1 s to connect, 5 s for the answer, 3 attempts,
 * network failures, 5xx and throttling (429) retried with full-jitter backoff, nothing else. A failed
 * call is an Error named by SES's code (MessageRejected, AccessDeniedException...), marked `permanent`
 * when SES will never take that message (its recipient refused: below). Locally the endpoint is the
 * SES stand-in (lib/local/ses.ts).
 */
import { AwsCallError, type AwsEndpoint, callAws } from './aws-call.js';

/** `url`: `https://email.<region>.amazonaws.com` (the SES stand-in locally). */
export type SesWhere = AwsEndpoint;

export interface Email {
  from: string;
  to: string;
  subject: string;
  text: string;
}

/**
 * Whether SES refused this message for good: a BadRequestException (an address SES cannot take), or a
 * MessageRejected whose unverified identities are the recipient's only (the SES sandbox refuses an
 * unverified recipient). Not when the From address is named (an identity still being verified: the
 * operator's to fix, and the message goes once it is), nor an access, quota or throttling refusal.
 * A recipient on the suppression list is no refusal: SES accepts the message and drops it.
 */
function permanentRefusal(error: unknown, email: Email): boolean {
  if (!(error instanceof AwsCallError)) return false;
  if (error.name === 'BadRequestException') return true;
  return (
    error.name === 'MessageRejected' &&
    error.message.includes(email.to) &&
    !error.message.toLowerCase().includes(email.from.toLowerCase())
  );
}

/**
 * Whether sendEmail's error refuses that one message for good (sendEmail marks it `permanent` by
 * permanentRefusal above): sending it again would fail again.
 */
export function permanentSesError(error: unknown): boolean {
  return error instanceof AwsCallError && (error as { permanent?: unknown }).permanent === true;
}

/** Sends one e-mail (a "Simple" plain-text message: SES assembles the MIME); resolves with SES's MessageId. */
export async function sendEmail(where: SesWhere, email: Email): Promise<string> {
  try {
    return await send(where, email);
  } catch (error) {
    if (permanentRefusal(error, email)) Object.assign(error as Error, { permanent: true });
    throw error;
  }
}

async function send(where: SesWhere, email: Email): Promise<string> {
  const text = await callAws(where, {
    service: 'ses',
    path: '/v2/email/outbound-emails',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      FromEmailAddress: email.from,
      Destination: { ToAddresses: [email.to] },
      Content: {
        Simple: {
          Subject: { Data: email.subject, Charset: 'UTF-8' },
          Body: { Text: { Data: email.text, Charset: 'UTF-8' } },
        },
      },
    }),
    timeoutMs: 5_000,
    maxAnswerBytes: 64 * 1024,
    attempts: 3,
    backoffBaseMs: 100,
  });
  const id = (JSON.parse(text) as { MessageId?: unknown }).MessageId;
  if (typeof id !== 'string') throw new AwsCallError('InvalidResponse', 'no MessageId', false);
  return id;
}
