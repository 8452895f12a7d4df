import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { originRefused } from '../../functions/shared/observability.js';
import { inProcessLauncher } from '../../lib/local/emulator.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

/**
 * The origin secret during a rotation: the functions accept its current and its previous version,
 * refuse anything else with 403, and count each refusal. Called on the bare Function URLs, with the
 * header set by the test as CloudFront would.
 */
let target: Target;
beforeAll(async () => {
  target = await startTarget({
    // In this thread: the test reads the refusal counter.
    launcher: inProcessLauncher,
    env: { ORIGIN_VERIFY_VALUE: 'current-secret', ORIGIN_VERIFY_PREVIOUS_VALUE: 'previous-secret' },
  });
});
afterAll(async () => {
  await target?.stop();
});

describe('origin verification through a rotation', () => {
  it.each(['completions', 'models'])(
    'the %s function serves the current and previous secrets, refuses a wrong one',
    async (fn) => {
      const { key } = await newAccount(target);
      const url = target.local?.emulator.functionUrls[fn];
      if (!url) throw new Error(`no bare URL for ${fn}`);
      const call = (secret: string | undefined) =>
        fn === 'completions'
          ? fetch(`${url}/api/v1/chat/completions`, {
              method: 'POST',
              headers: {
                authorization: `Bearer ${key}`,
                'content-type': 'application/json',
                ...(secret ? { 'x-origin-verify': secret } : {}),
              },
              body: JSON.stringify({
                model: 'svc-fast',
                messages: [{ role: 'user', content: 'hi [[sim:tokens=2]]' }],
              }),
            })
          : fetch(`${url}/api/v1/models`, {
              headers: { authorization: `Bearer ${key}`, ...(secret ? { 'x-origin-verify': secret } : {}) },
            });
      for (const secret of ['current-secret', 'previous-secret']) {
        const response = await call(secret);
        expect(response.status, secret).toBe(200);
        await response.arrayBuffer();
      }
      const before = originRefused.count;
      for (const secret of ['wrong-secret', 'current-secreT', undefined]) {
        const response = await call(secret);
        expect(response.status, String(secret)).toBe(403);
        expect(((await response.json()) as { error: { code: string } }).error.code).toBe(
          'origin_not_verified',
        );
      }
      expect(originRefused.count - before).toBe(3);
    },
  );

  it("the payments function (Stripe's webhook) refuses its bare URL before the signature is looked at", async () => {
    const url = target.local?.emulator.functionUrls.payments;
    if (!url) throw new Error('no bare URL for payments');
    // A forged event: past the origin check it is the signature's 400; without the header, the 403.
    const call = (secret: string | undefined) =>
      fetch(`${url}/stripe/webhook`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'stripe-signature': `t=${Math.floor(Date.now() / 1000)},v1=00`,
          ...(secret ? { 'x-origin-verify': secret } : {}),
        },
        body: JSON.stringify({ id: 'evt_forged', type: 'checkout.session.completed', data: { object: {} } }),
      });
    for (const secret of ['current-secret', 'previous-secret']) {
      const response = await call(secret);
      expect(response.status, secret).toBe(400);
      await response.arrayBuffer();
    }
    const before = originRefused.count;
    for (const secret of ['wrong-secret', undefined]) {
      const response = await call(secret);
      expect(response.status, String(secret)).toBe(403);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('origin_not_verified');
    }
    expect(originRefused.count - before).toBe(2);
  });
});
