import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import middy from '@middy/core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { generateApiKey } from '../../functions/core/auth.js';
import { BadRequestError, HttpError } from '../../functions/core/errors.js';
import { authenticate, type CallerContext } from '../../functions/shared/authenticate.js';
import type { FunctionUrlEvent, FunctionUrlResult } from '../../functions/shared/http.js';
import { ensureTables, localClient } from '../../lib/local/dynamodb-local.js';
import { localTableNames } from '../../lib/local/stack.js';
import { type OutboundCall, watchOutbound } from '../support/dynamo-calls.js';
import { accountWith } from '../support/fixtures.js';

/**
 * The authenticate middleware against DynamoDB Local: work that needs no caller (the completions
 * function's body parse) runs while the caller's read is on the wire, not before it is sent nor after
 * its answer; and the caller's own errors still come before that work's.
 *
 * The store's reads go through a proxy that holds each answer until the gate opens: on a loaded
 * machine this process can be descheduled long enough for DynamoDB Local to answer between two loop
 * turns, so "before its answer" is made a fact of the test, not of the scheduler. What is still
 * measured is the order this process runs things in: the read written before the work runs.
 */
const tables = localTableNames(`auth${randomBytes(3).toString('hex')}-`);
const client = localClient(inject('dynamoEndpoint'));
let gate = { opened: Promise.resolve(), open: () => {} };
function closeGate() {
  let open = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  gate = { opened, open };
}
let proxy: Server;
let store: DynamoStore;
let key: string;

beforeAll(async () => {
  const target = inject('dynamoEndpoint');
  proxy = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    await gate.opened;
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(
        ([name]) => !['host', 'connection', 'content-length'].includes(name),
      ),
    ) as Record<string, string>;
    const answer = await fetch(new URL(req.url ?? '/', target), {
      method: req.method ?? 'POST',
      headers,
      body: Buffer.concat(chunks),
    });
    res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? '' });
    res.end(Buffer.from(await answer.arrayBuffer()));
  });
  await new Promise<void>((ready) => proxy.listen(0, '127.0.0.1', ready));
  store = new DynamoStore(localClient(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}`), tables);
  await ensureTables(client, tables);
  key = (await accountWith(store, '1', 'acct-auth')).key;
});

afterAll(async () => {
  await new Promise((closed) => proxy.close(closed));
});

type Refusing = CallerContext & { refused?: unknown };

interface Seen {
  /** What the key read had done when `whileReading` ran. */
  sent: boolean;
  answered: boolean;
}

function handlerWith(seen: Seen[], watch: () => Pick<OutboundCall, 'written' | 'answered'>) {
  return middy<FunctionUrlEvent, FunctionUrlResult, Error, CallerContext>()
    .use(
      authenticate({
        store: () => store,
        requireCredit: true,
        topUpUrl: 'https://example.test/top-up',
        whileReading: () => {
          const read = watch();
          seen.push({ sent: read.written, answered: read.answered });
          gate.open();
        },
      }),
    )
    .handler(async (_event, context) => ({
      statusCode: 200,
      headers: {},
      body: context.caller.accountId,
    }));
}

const eventWith = (authorization: string) =>
  ({
    headers: { authorization },
    requestContext: { http: { method: 'POST' } },
  }) as unknown as FunctionUrlEvent;

/** The direct DynamoDB calls this process makes (wire.ts over node:http), and what each has done. */
function watchReads() {
  const reads: OutboundCall[] = [];
  const stop = watchOutbound((call) => {
    if (call.operation) reads.push(call);
  });
  return {
    last: (): Pick<OutboundCall, 'written' | 'answered'> =>
      reads.at(-1) ?? { written: false, answered: false },
    stop,
  };
}

describe('authenticate', () => {
  it('runs whileReading once the key read has been sent on a kept-alive connection, and before its answer', async () => {
    const seen: Seen[] = [];
    const reads = watchReads();
    try {
      const handler = handlerWith(seen, reads.last);
      // The first read of a key is cold (the key, then its account, two direct reads); the next ones are
      // one batch read. The first use of the direct client's connection waits for its TCP handshake,
      // which the work overlaps instead; after that, the request is on the wire. (the agent takes a socket
      // again a loop turn after its answer, as requests a function instance serves are apart.)
      for (let i = 0; i < 5; i++) {
        closeGate();
        const result = await handler(eventWith(`Bearer ${key}`), {} as Refusing);
        expect(result.body).toBe('acct-auth');
        await new Promise((ready) => setImmediate(ready));
      }
    } finally {
      reads.stop();
    }
    expect(seen.map((s) => s.answered)).toEqual([false, false, false, false, false]);
    expect(seen.slice(2)).toEqual([
      { sent: true, answered: false },
      { sent: true, answered: false },
      { sent: true, answered: false },
    ]);
  });

  it("answers the caller's errors before the work's own: an unknown key is 401 whatever the body", async () => {
    const handler = middy<FunctionUrlEvent, FunctionUrlResult, Error, Refusing>()
      .use(
        authenticate<Refusing>({
          store: () => store,
          requireCredit: true,
          topUpUrl: '',
          whileReading: (request) => {
            request.context.refused = new BadRequestError('The request body is not valid JSON.');
          },
        }),
      )
      .handler(async (_event, context) => {
        throw context.refused;
      });
    const unknown = generateApiKey().key;
    const error = await handler(eventWith(`Bearer ${unknown}`), {} as Refusing).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpError);
    expect((error as HttpError).statusCode).toBe(401);
    const known = await handler(eventWith(`Bearer ${key}`), {} as Refusing).catch((e: unknown) => e);
    expect((known as HttpError).statusCode).toBe(400);
  });
});
