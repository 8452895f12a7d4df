/**
 * Amazon SES v2's SendEmail spoken directly, as secrets-manager.ts speaks Secrets Manager (both through
 * aws-call.ts): its REST-JSON protocol (`POST /v2/email/outbound-emails`, a JSON body,
 * `{"MessageId": "..."}` back) to `email.<region>.amazonaws.com`, SigV4-signed for service `ses`:
 * the function bundle carries no SDK client. Bounded: 1 s to connect, 5 s for the answer, 3 attempts,
 * network failures, 5xx and throttling (429) retried with full-jitter backoff, nothing else. A failed
 * call is an Error named by SES's code (MessageRejected, AccessDeniedException...). Locally the
 * endpoint is the SES stand-in (lib/local/ses.ts).
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
 * SES's answers that refuse the message itself, so that sending it again fails again: its content or
 * its recipient (MessageRejected: in the sandbox, also an unverified recipient), or a malformed
 * request (BadRequestException). Refusals of the sender or the account (AccessDeniedException,
 * SendingPausedException, AccountSuspendedException, MailFromDomainNotVerifiedException) are not:
 * fixed, every waiting e-mail goes out.
 */
const PERMANENT_REFUSALS = new Set(['MessageRejected', 'BadRequestException']);

/** Whether sendEmail's error refuses that one message for good. */
export function permanentSesError(error: unknown): boolean {
  return error instanceof AwsCallError && PERMANENT_REFUSALS.has(error.name);
}

/** Sends one e-mail (a "Simple" plain-text message: SES assembles the MIME); resolves with SES's MessageId. */
export async function sendEmail(where: SesWhere, email: Email): Promise<string> {
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
