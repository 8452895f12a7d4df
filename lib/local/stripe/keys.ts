/**
 * Restricted keys in the Stripe stand-in, as Stripe has them: each allows, per resource, None, Read
 * or Write (Write includes Read), and a call the key does not allow is answered 403 with Stripe's
 * `permission_error`, naming the permission that would allow it. The local stack gives each function
 * that calls Stripe the restricted key docs/deploy.md ("Connecting Stripe") lists for it, so its
 * tests show that key is enough for the function's calls, and that one function's key is refused
 * another's.
 */

/** The resources the service's calls touch (Stripe's "Charges and Refunds" is one). */
type StripeResource =
  | 'checkout_sessions'
  | 'payment_intents'
  | 'payment_methods'
  | 'customers'
  | 'charges'
  | 'disputes'
  | 'events'
  | 'invoices';
export type KeyPermissions = Partial<Record<StripeResource, 'read' | 'write'>>;

/** Who has a restricted key of its own (lib/infra/stripe-keys.ts). */
export type StripeKeyHolder = 'payments' | 'dashboard' | 'watch' | 'reconciler';

/** Each function's restricted key: the table in docs/deploy.md, "Connecting Stripe". */
const FUNCTION_KEY_PERMISSIONS: Record<StripeKeyHolder, KeyPermissions> = {
  // Customers: Read and Invoices: Write for an auto top-up's invoice (payments/invoicing.ts), which
  // the webhook, the watch's lookup of a lost event and the reconciler each may make.
  payments: {
    payment_intents: 'read',
    payment_methods: 'read',
    charges: 'read',
    customers: 'read',
    invoices: 'write',
  },
  // Customers: Write (the account's Customer and its billing profile); Invoices: Read (the list).
  dashboard: { checkout_sessions: 'write', customers: 'write', invoices: 'read' },
  watch: { payment_intents: 'write', customers: 'read', invoices: 'write' },
  reconciler: {
    customers: 'read',
    invoices: 'write',
    events: 'read',
    payment_intents: 'read',
    payment_methods: 'read',
    charges: 'read',
    checkout_sessions: 'read',
    disputes: 'read',
  },
};

/** The local stack's restricted key of a function (the stand-in accepts it as FUNCTION_KEY_PERMISSIONS says). */
export const localStripeKey = (holder: StripeKeyHolder): string => `rk_test_local_${holder}`;

/** Every function's local restricted key with its permissions, for the stand-in. */
export function localRestrictedKeys(): Record<string, KeyPermissions> {
  return Object.fromEntries(
    (Object.keys(FUNCTION_KEY_PERMISSIONS) as StripeKeyHolder[]).map((holder) => [
      localStripeKey(holder),
      FUNCTION_KEY_PERMISSIONS[holder],
    ]),
  );
}

interface Needed {
  resource: StripeResource;
  level: 'read' | 'write';
}

const read = (resource: StripeResource): Needed => ({ resource, level: 'read' });
const write = (resource: StripeResource): Needed => ({ resource, level: 'write' });

/** What each of the stand-in's API routes needs of a restricted key. */
const ROUTE_NEEDS: Record<string, Needed> = {
  'POST /checkout/sessions': write('checkout_sessions'),
  'GET /checkout/sessions/:id': read('checkout_sessions'),
  'GET /payment_intents/:id': read('payment_intents'),
  'POST /payment_intents': write('payment_intents'),
  'GET /events': read('events'),
  'GET /events/:id': read('events'),
  'GET /payment_methods/:id': read('payment_methods'),
  'POST /payment_methods/:id/detach': write('payment_methods'),
  'GET /customers/:id': read('customers'),
  'DELETE /customers/:id': write('customers'),
  'GET /charges/:id': read('charges'),
  'GET /refunds/:id': read('charges'),
  'GET /refunds': read('charges'),
  'POST /refunds': write('charges'),
  // A customer's billing details and tax IDs are the Customers permission's; search is `/:id` here.
  'POST /customers': write('customers'),
  'POST /customers/:id': write('customers'),
  'GET /customers/:id/tax_ids': read('customers'),
  'POST /customers/:id/tax_ids': write('customers'),
  'DELETE /customers/:id/tax_ids': write('customers'),
  'POST /invoiceitems': write('invoices'),
  'POST /invoices': write('invoices'),
  'GET /invoices': read('invoices'),
  'GET /invoices/:id': read('invoices'),
  'POST /invoices/:id/finalize': write('invoices'),
  'POST /invoices/:id/pay': write('invoices'),
};

/** The resource an `expand[]` of a route's answer reads (a Customer's tax IDs are the Customers permission's). */
const EXPANDS: Record<string, StripeResource> = {
  payment_method: 'payment_methods',
  customer: 'customers',
  tax_ids: 'customers',
};

/** Stripe's name for a permission: `rak_<resource, singular>_<level>`. */
const permissionName = ({ resource, level }: Needed) => `rak_${resource.replace(/s$/, '')}_${level}`;

/**
 * The permission a restricted key lacks for a route (with its `expand[]`), or undefined when it has
 * all it needs. A route the table does not know needs nothing more (the stand-in answers it 404).
 */
export function missingPermission(
  permissions: KeyPermissions,
  route: string,
  expand: readonly string[],
): string | undefined {
  const needed = [
    ...(ROUTE_NEEDS[route] ? [ROUTE_NEEDS[route]] : []),
    ...expand.flatMap((field) => {
      const resource = EXPANDS[field];
      return resource ? [read(resource)] : [];
    }),
  ];
  const lacking = needed.find(({ resource, level }) => {
    const has = permissions[resource];
    return level === 'write' ? has !== 'write' : has === undefined;
  });
  return lacking && permissionName(lacking);
}

/** Stripe's message for a call the key does not allow (its 403 `permission_error`). */
export function permissionMessage(key: string, permission: string): string {
  const shown = `${key.slice(0, 8)}${'*'.repeat(8)}${key.slice(-4)}`;
  return `The provided key '${shown}' does not have the required permissions for this endpoint on account 'acct_local'. Having the '${permission}' permission would allow this request to continue.`;
}
