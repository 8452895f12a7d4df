/**
 * The dashboard's pages compressed for a browser that accepts gzip, through the local stack as
 * deployed (the emulated distribution, the Function URL's base64 body, Hono's Lambda adapter): the
 * bytes on the wire are gzip and decode to the very page an uncompressed request gets.
 */
import { request } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../../lib/local/stack.js';
import { Browser, formAction } from '../support/browser.js';
import { startTarget, type Target } from '../support/target.js';

let target: Target;
let local: LocalStack;
let origin: string;

beforeAll(async () => {
  target = await startTarget();
  local = target.local as LocalStack;
  origin = local.emulator.url;
}, 120_000);

afterAll(async () => {
  await target?.stop();
});

/** One GET, the body's bytes as they came (no decoding). */
function rawGet(url: string, headers: Record<string, string>) {
  return new Promise<{
    status: number;
    headers: Record<string, string | string[] | undefined>;
    body: Buffer;
  }>((resolve, reject) => {
    request(url, { headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks) }),
      );
      response.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
}

describe("the dashboard's pages, compressed", () => {
  it('answers a page gzipped to a browser that accepts gzip, decoding to the same HTML', async () => {
    const browser = new Browser();
    const signInPage = await browser.open(`${origin}/dashboard/sign-in`);
    const home = await browser.submit(signInPage, formAction(signInPage.body, /\/interaction\//), {
      email: local.oidc.user.email,
      password: local.oidc.user.password,
    });
    expect(home.status).toBe(200);
    const cookie = [...browser.cookies(origin)].map(([name, value]) => `${name}=${value}`).join('; ');
    const page = `${origin}/dashboard/billing`;
    const plain = await rawGet(page, { cookie });
    expect(plain.status).toBe(200);
    expect(plain.headers['content-encoding']).toBeUndefined();
    const html = plain.body.toString('utf8');
    expect(html).toContain('<html');
    const gzipped = await rawGet(page, { cookie, 'accept-encoding': 'gzip, deflate, br' });
    expect(gzipped.status).toBe(200);
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    expect(String(gzipped.headers.vary).toLowerCase()).toContain('accept-encoding');
    expect(gzipped.body.length).toBeLessThan(plain.body.length);
    expect(gunzipSync(gzipped.body).toString('utf8')).toBe(html);
  });
});
