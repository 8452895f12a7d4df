/**
 * The SES stand-in: a small HTTP server on 127.0.0.1 speaking the one call the service makes to
 * Amazon SES, API v2 SendEmail (`POST /v2/email/outbound-emails`, a JSON body, `{"MessageId"}` back),
 * reached by the same code as in AWS (functions/adapters/ses.ts) through SES_ENDPOINT. As SES does, it
 * refuses a request without a SigV4 Authorization header for the `ses` service (403), a From address
 * that is not a verified identity (400 MessageRejected), and a message without recipients, subject or
 * body (400 BadRequestException). It keeps what it accepted in memory, in order (its outbox, which
 * tests read), and shows it at `GET /` for `npm start`.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

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
  /** Every e-mail accepted, in order. */
  messages: SentEmail[];
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

export async function startSesStandIn(
  options: { sender?: string; port?: number } = {},
): Promise<RunningSesStandIn> {
  const sender = options.sender ?? 'alerts@example.com';
  const messages: SentEmail[] = [];

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
    if (from !== sender)
      return reply(
        res,
        400,
        { message: `Email address is not verified. The following identities failed the check: ${from}` },
        'MessageRejected',
      );
    const destination = (body.Destination ?? {}) as { ToAddresses?: unknown };
    const to = Array.isArray(destination.ToAddresses) ? destination.ToAddresses.map(String) : [];
    const simple = ((body.Content ?? {}) as { Simple?: Record<string, unknown> }).Simple;
    const subject = (simple?.Subject as { Data?: unknown } | undefined)?.Data;
    const text = (simple?.Body as { Text?: { Data?: unknown } } | undefined)?.Text?.Data;
    if (to.length === 0 || typeof subject !== 'string' || typeof text !== 'string')
      return reply(
        res,
        400,
        { message: 'A Simple message needs Destination.ToAddresses, Subject.Data and Body.Text.Data' },
        'BadRequestException',
      );
    const messageId = `${Date.now().toString(16)}-${randomUUID()}-000000`;
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
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
