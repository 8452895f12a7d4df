/**
 * A fake OpenAI-compatible upstream for tests that need one the simulator cannot play (a liar, an
 * OpenRouter-shaped reply): a loopback server that reads each JSON request body, records it, and hands
 * it to the test's `answer`.
 */
import { createServer, type ServerResponse } from 'node:http';

export interface FakeUpstream {
  /** `http://127.0.0.1:<port>/v1`: a target's baseUrl. */
  url: string;
  /** Every request body, in order. */
  received: Record<string, unknown>[];
  /** Resolves when the response to the latest request has closed (the gateway hung up or it ended). */
  lastClosed(): Promise<void>;
  close(): Promise<void>;
}

export async function startFakeUpstream(
  answer: (body: Record<string, unknown>, res: ServerResponse) => void,
): Promise<FakeUpstream> {
  const received: Record<string, unknown>[] = [];
  let closed: Promise<void> = Promise.resolve();
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (part) => {
      raw += part;
    });
    req.on('end', () => {
      closed = new Promise((resolve) => res.on('close', () => resolve()));
      const body = JSON.parse(raw) as Record<string, unknown>;
      received.push(body);
      answer(body, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/v1`,
    received,
    lastClosed: () => closed,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
