/**
 * The Stripe API version is pinned in one place (functions/payments/stripe-api.ts), which every
 * Stripe client of the service is made by, and docs/deploy.md tells the operator to give the
 * webhook endpoint that same version: events arrive in the shape the code reads.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Stripe from 'stripe';
import { describe, expect, it } from 'vitest';
import { STRIPE_API_VERSION, stripeClient } from '../../../functions/payments/stripe-api.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

describe('the Stripe API version', () => {
  it('is the one docs/deploy.md names for the webhook endpoint, and no other', () => {
    const doc = readFileSync(resolve(root, 'docs/deploy.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## Connecting Stripe'));
    expect(section.replace(/\s+/g, ' ')).toContain(`API version \`${STRIPE_API_VERSION}\``);
    const named = new Set([...doc.matchAll(/`(\d{4}-\d{2}-\d{2}\.[a-z]+)`/g)].map((m) => m[1]));
    expect([...named]).toEqual([STRIPE_API_VERSION]);
  });

  it('is the version the clients send, and the version of the events the stand-in signs', () => {
    const client = stripeClient({ apiKey: 'sk_test_version' });
    expect(client.getApiField('version')).toBe(STRIPE_API_VERSION);
    expect(Stripe.API_VERSION).toBe(STRIPE_API_VERSION);
  });
});
