import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OriginSetup } from '../../lib/infra/edge-routes.js';
import { settled } from '../support/settled.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

/**
 * A customer's key through CloudFront to the account function, with the emulator doing what
 * CloudFront and Function URLs do (lib/local/cloudfront.ts): each origin set up as the stack deploys
 * it (lib/infra/edge-routes.ts), an origin access control's signature replacing the viewer's
 * `Authorization`, an AWS_IAM URL refusing what is not signed for it.
 */
const ACCOUNT_PATHS = ['/models', '/credits', '/generation?id='] as const;

async function generationOf(target: Target, key: string): Promise<string> {
  const response = await fetch(`${target.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi [[sim:tokens=2]]' }] }),
  });
  expect(response.status).toBe(200);
  const { id } = (await response.json()) as { id: string };
  await settled(target);
  return id;
}

/** Each account path with the key: its status and error code, if any. */
async function accountAnswers(target: Target, key: string, generation: string) {
  const answers: Record<string, { status: number; code: string | undefined }> = {};
  for (const path of ACCOUNT_PATHS) {
    const url = `${target.baseUrl}${path}${path.endsWith('=') ? generation : ''}`;
    const response = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
    const body = (await response.json()) as { error?: { code?: string } };
    answers[path] = { status: response.status, code: body.error?.code };
  }
  return answers;
}

describe('a Bearer key through CloudFront, as deployed', () => {
  let target: Target;
  beforeAll(async () => {
    target = await startTarget();
  });
  afterAll(async () => {
    await target?.stop();
  });

  it('answers a request without a well-formed key at the edge, 401 without invoking a function', async () => {
    const before = ['models', 'completions'].map((fn) => target.local?.emulator.stats(fn).invocations);
    for (const [path, authorization] of [
      ['/models', undefined],
      ['/credits', 'Bearer svc_live_short'],
      ['/chat/completions', 'Basic dXNlcjpwYXNz'],
    ] as const) {
      const response = await fetch(`${target.baseUrl}${path}`, {
        method: path === '/chat/completions' ? 'POST' : 'GET',
        headers: authorization ? { authorization } : {},
      });
      expect(response.status, path).toBe(401);
      expect(response.headers.get('x-request-id'), path).toBeTruthy();
      expect(((await response.json()) as { error: { type: string } }).error.type).toBe(
        'authentication_error',
      );
    }
    expect(['models', 'completions'].map((fn) => target.local?.emulator.stats(fn).invocations)).toEqual(
      before,
    );
  });

  it('reaches the account function: /models, /credits and /generation answer 200', async () => {
    const { key } = await newAccount(target);
    const answers = await accountAnswers(target, key, await generationOf(target, key));
    expect(answers).toEqual(
      Object.fromEntries(ACCOUNT_PATHS.map((path) => [path, { status: 200, code: undefined }])),
    );
  });
});

describe('the emulator catches an origin setup that breaks the key on AWS', () => {
  // The account URL as first deployed: AWS_IAM behind an OAC that signs always.
  const signedAlways: OriginSetup = {
    urlAuthType: 'AWS_IAM',
    originAccessControl: 'always',
    originHeader: true,
  };
  let target: Target;
  beforeAll(async () => {
    target = await startTarget({ origins: { models: signedAlways } });
  });
  afterAll(async () => {
    await target?.stop();
  });

  it("answers 401 on every account path: CloudFront's signature replaced the key", async () => {
    const { key } = await newAccount(target);
    const answers = await accountAnswers(target, key, await generationOf(target, key));
    for (const path of ACCOUNT_PATHS)
      expect(answers[path], path).toEqual({ status: 401, code: 'invalid_authorization_scheme' });
  });

  it('refuses an unsigned request on the AWS_IAM URL itself, 403 before the function runs', async () => {
    const { key } = await newAccount(target);
    const bare = target.local?.emulator.functionUrls.models;
    const before = target.local?.emulator.stats('models').invocations;
    const response = await fetch(`${bare}/api/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(response.status).toBe(403);
    expect(await response.json()).toEqual({ Message: 'Forbidden' });
    expect(target.local?.emulator.stats('models').invocations).toBe(before);
  });
});
