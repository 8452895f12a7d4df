/**
 * The SES stand-in: a small HTTP server on 127.0.0.1 speaking the one call the service makes to
 * Amazon SES, API v2 SendEmail (`POST /v2/email/outbound-emails`, a JSON body, `{"MessageId"}` back),
 * reached by the same code as in AWS (functions/adapters/ses.ts) through SES_ENDPOINT. As SES does, it
 * refuses a request without a SigV4 Authorization header for the `ses` service (403), a message
 * without recipients, subject or body (400 BadRequestException), and a From address that is not a
 * verified identity (400 MessageRejected, the identity named).
 *
 * Identities and the sandbox, as a new account meets them ("Request production access (Moving out of
 * the Amazon SES sandbox)", https://docs.aws.amazon.com/ses/latest/dg/request-production-access.html):
 * in `sandbox` mode (SES's state for every new account, per region) every recipient must be a
 * verified identity too (its address, or its domain), else 400 MessageRejected naming it; in
 * `production` mode any recipient is taken. An identity is an address or a domain; an address is
 * covered by its own identity when that is verified, else by its domain's.
 *
 * IAM, as SES checks it ("Identity and access management in Amazon SES",
 * https://docs.aws.amazon.com/ses/latest/dg/control-user-access.html; the Service Authorization
 * Reference's SendEmail: resource types identity and configuration-set, condition key
 * ses:FromAddress): with `authorize` given (the local stack's synthesized policies, lib/local/iam.ts),
 * the caller's role must be allowed `ses:SendEmail` on the sender's identity ARN, on the configuration
 * set's ARN when the message has one (its ConfigurationSetName, or the sender identity's default
 * configuration set), and, in the sandbox, on each recipient's identity ARN; the request's
 * `ses:FromAddress` is the From address. A refusal is 403 AccessDeniedException, worded as IAM words it.
 *
 * The account-level suppression list: a message to an address on it is accepted (200, a MessageId)
 * and not delivered, as SES does (it drops the send and records a bounce, which the sender never sees
 * in the answer); such sends (the service sends one recipient a message) are kept apart
 * (`suppressedSends`) and never reach the outbox.
 *
 * It keeps what it delivered in memory, in order (its outbox, which tests read), and shows it at
 * `GET /` for `npm start`.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** An IAM permission one call needs (as lib/local/iam.ts names them). */
interface SesPermission {
  action: string;
  resource: string;
}

/** Holds a call to the caller's policy: a refusal's message, or undefined when allowed. */
type SesAuthorizer = (call: {
  accessKeyId: string;
  needed: SesPermission[];
  context: Record<string, string>;
}) => { code: 'AccessDeniedException' | 'UnrecognizedClientException'; message: string } | undefined;

export interface SesStandInOptions {
  /** The verified sender address (ALERT_SENDER). */
  sender?: string;
  /** The verified identities (addresses or domains); default the sender's address. */
  identities?: string[];
  /** Each identity's default configuration set, by identity. */
  defaultConfigurationSets?: Record<string, string>;
  /** `production` (the default) takes any recipient; `sandbox` only verified ones. */
  mode?: 'sandbox' | 'production';
  /** The caller's IAM check; without it no permission is checked (a bare stand-in). */
  authorize?: SesAuthorizer;
  /** The ARN prefix of this account's SES resources: `arn:aws:ses:<region>:<account>:`. */
  arnPrefix?: string;
  port?: number;
}

interface SentEmail {
  messageId: string;
  from: string;
  to: string[];
  subject: string;
  text: string;
  /** The service and access key id its signature named (`ses`, the caller's role locally). */
  service: string;
  accessKeyId: string;
  at: string;
}

export interface RunningSesStandIn {
  /** `http://127.0.0.1:<port>`: SES_ENDPOINT for the balance watch. */
  url: string;
  /** The verified sender identity (ALERT_SENDER). */
  sender: string;
  /** Every e-mail delivered, in order. */
  messages: SentEmail[];
  /** Every e-mail accepted for a suppressed recipient and not delivered, in order. */
  suppressedSends: SentEmail[];
  /** Every refusal answered, in order. */
  refusals: { code: string; message: string }[];
  /** The account's sandbox state (a production access request granted: `production`). */
  mode: 'sandbox' | 'production';
  /** Verifies an identity (an address or a domain), as its confirmation link or DNS records would. */
  verify(identity: string): void;
  /** Puts an address on the account-level suppression list (a hard bounce or a complaint did). */
  suppress(address: string): void;
  close(): Promise<void>;
}

const MAX_BODY = 10 * 1024 * 1024;
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function reply(res: ServerResponse, status: number, body: unknown, errorType?: string): void {
  res.writeHead(status, {
    'content-type': 'application/json',
    'x-amzn-requestid': randomUUID(),
    ...(errorType ? { 'x-amzn-errortype': errorType } : {}),
  });
  res.end(
    JSON.stringify(errorType ? { __type: errorType, message: (body as { message: string }).message } : body),
  );
}

/** `AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/<service>/aws4_request, SignedHeaders=..., Signature=...` */
function signatureOf(header: string | undefined): { accessKeyId: string; service: string } | undefined {
  const match =
    /^AWS4-HMAC-SHA256 Credential=([^/,\s]+)\/\d{8}\/[^/]+\/([^/]+)\/aws4_request,\s*SignedHeaders=[^,]+,\s*Signature=[0-9a-f]{64}$/.exec(
      header ?? '',
    );
  return match ? { accessKeyId: match[1] as string, service: match[2] as string } : undefined;
}

function outboxPage(messages: SentEmail[]): string {
  const rows = [...messages]
    .reverse()
    .map(
      (m) => `<article><h2>${escapeHtml(m.subject)}</h2>
<p>From ${escapeHtml(m.from)} to ${escapeHtml(m.to.join(', '))}, ${escapeHtml(m.at)}</p>
<pre>${escapeHtml(m.text)}</pre></article>`,
    )
    .join('\n');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Outbox (SES stand-in)</title></head>
<body><h1>E-mails sent through the SES stand-in</h1>${rows || '<p>None yet.</p>'}</body></html>`;
}

const domainOf = (address: string) => address.slice(address.lastIndexOf('@') + 1).toLowerCase();

export async function startSesStandIn(options: SesStandInOptions = {}): Promise<RunningSesStandIn> {
  const sender = options.sender ?? 'alerts@example.com';
  const messages: SentEmail[] = [];
  const suppressedSends: SentEmail[] = [];
  const refusals: { code: string; message: string }[] = [];
  const verified = new Set((options.identities ?? [sender]).map((i) => i.toLowerCase()));
  const suppressed = new Set<string>();
  const arnPrefix = options.arnPrefix ?? 'arn:aws:ses:local:000000000000:';
  const state = { mode: options.mode ?? 'production' };
  /** The verified identity that covers an address: its own, else its domain's. */
  const identityOf = (address: string): string | undefined => {
    const lower = address.toLowerCase();
    if (verified.has(lower)) return lower;
    return verified.has(domainOf(lower)) ? domainOf(lower) : undefined;
  };
  const refuse = (res: ServerResponse, status: number, code: string, message: string) => {
    refusals.push({ code, message });
    reply(res, status, { message }, code);
  };

  const send = async (req: IncomingMessage, res: ServerResponse) => {
    const signature = signatureOf(req.headers.authorization);
    if (signature?.service !== 'ses')
      return reply(
        res,
        403,
        { message: 'Missing Authentication Token, or a signature for another service than ses' },
        'UnrecognizedClientException',
      );
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY) return reply(res, 400, { message: 'Message too large' }, 'BadRequestException');
      chunks.push(chunk as Buffer);
    }
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
    } catch {
      return reply(res, 400, { message: 'Could not parse the request body' }, 'BadRequestException');
    }
    const from = typeof body.FromEmailAddress === 'string' ? body.FromEmailAddress : '';
    const destination = (body.Destination ?? {}) as { ToAddresses?: unknown };
    const to = Array.isArray(destination.ToAddresses) ? destination.ToAddresses.map(String) : [];
    const simple = ((body.Content ?? {}) as { Simple?: Record<string, unknown> }).Simple;
    const subject = (simple?.Subject as { Data?: unknown } | undefined)?.Data;
    const text = (simple?.Body as { Text?: { Data?: unknown } } | undefined)?.Text?.Data;
    if (to.length === 0 || typeof subject !== 'string' || typeof text !== 'string')
      return refuse(
        res,
        400,
        'BadRequestException',
        'A Simple message needs Destination.ToAddresses, Subject.Data and Body.Text.Data',
      );
    if (!/^[^\s@<>]+@[^\s@<>]+$/.test(from) || to.some((address) => !/^[^\s@<>]+@[^\s@<>]+$/.test(address)))
      return refuse(res, 400, 'BadRequestException', 'Illegal address');
    const fromIdentity = identityOf(from);
    const unverified = [
      ...(fromIdentity ? [] : [from]),
      ...(state.mode === 'sandbox' ? to.filter((address) => !identityOf(address)) : []),
    ];
    if (unverified.length > 0)
      return refuse(
        res,
        400,
        'MessageRejected',
        `Email address is not verified. The following identities failed the check in region LOCAL: ${unverified.join(', ')}`,
      );
    if (options.authorize) {
      const configurationSet =
        typeof body.ConfigurationSetName === 'string'
          ? body.ConfigurationSetName
          : options.defaultConfigurationSets?.[fromIdentity as string];
      const needed: SesPermission[] = [
        { action: 'ses:SendEmail', resource: `${arnPrefix}identity/${fromIdentity}` },
        ...(configurationSet
          ? [{ action: 'ses:SendEmail', resource: `${arnPrefix}configuration-set/${configurationSet}` }]
          : []),
        ...(state.mode === 'sandbox'
          ? to.map((address) => ({
              action: 'ses:SendEmail',
              resource: `${arnPrefix}identity/${identityOf(address)}`,
            }))
          : []),
      ];
      const refusal = options.authorize({
        accessKeyId: signature.accessKeyId,
        needed,
        context: { 'ses:fromaddress': from, 'ses:apiversion': '2' },
      });
      if (refusal) return refuse(res, 403, refusal.code, refusal.message);
    }
    const messageId = `${Date.now().toString(16)}-${randomUUID()}-000000`;
    if (to.some((address) => suppressed.has(address.toLowerCase()))) {
      suppressedSends.push({
        messageId,
        from,
        to,
        subject,
        text,
        service: signature.service,
        accessKeyId: signature.accessKeyId,
        at: new Date().toISOString(),
      });
      return reply(res, 200, { MessageId: messageId });
    }
    messages.push({
      messageId,
      from,
      to,
      subject,
      text,
      service: signature.service,
      accessKeyId: signature.accessKeyId,
      at: new Date().toISOString(),
    });
    return reply(res, 200, { MessageId: messageId });
  };

  const page = async (res: ServerResponse) => {
    res.writeHead(200, {
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': "default-src 'none'",
    });
    res.end(outboxPage(messages));
  };

  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
    const served =
      req.method === 'POST' && path === '/v2/email/outbound-emails'
        ? send(req, res)
        : req.method === 'GET' && path === '/'
          ? page(res)
          : Promise.resolve(reply(res, 404, { message: 'Not found' }, 'NotFoundException'));
    served.catch((error: unknown) => {
      if (!res.headersSent)
        reply(
          res,
          500,
          { message: error instanceof Error ? error.message : String(error) },
          'InternalFailure',
        );
      else res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    sender,
    messages,
    suppressedSends,
    refusals,
    get mode() {
      return state.mode;
    },
    set mode(mode: 'sandbox' | 'production') {
      state.mode = mode;
    },
    verify(identity: string) {
      verified.add(identity.toLowerCase());
    },
    suppress(address: string) {
      suppressed.add(address.toLowerCase());
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
