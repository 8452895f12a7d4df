/** @jsxImportSource hono/jsx */
/**
 * Billing → Profile and Billing → Invoices: the billing profile's form (what every invoice carries,
 * kept on the account's Stripe Customer: payments/invoicing.ts) and the account's invoices, each
 * with its PDF and Stripe's page of it. The links under Billing's balance lead here and to the
 * monthly statement (statement-page.tsx).
 */
import type { BillingProfile } from '../payments/billing-profile.js';
import type { InvoiceView } from '../payments/invoicing.js';
import { TAX_ID_TYPES } from '../payments/tax-ids.js';
import { Layout, usd, when } from './pages.js';
import { TAX_ID_SLOTS } from './profile-form.js';

/** The profile as the form shows it: as kept, or as typed (a type not known, shown again). */
export type ProfileView = Omit<BillingProfile, 'taxIds'> & { taxIds: { type: string; value: string }[] };

/** The links to Billing's documents, on Billing and on each of them. */
export function BillingLinks(props: { month?: string }) {
  return (
    <nav class="sub no-print" aria-label="Billing documents">
      <a href="/dashboard/billing">Billing</a>
      <a href="/dashboard/billing/profile">Billing profile</a>
      <a href="/dashboard/billing/invoices">Invoices</a>
      <a href={`/dashboard/billing/statement${props.month ? `/${props.month}` : ''}`}>Monthly statement</a>
    </nav>
  );
}

function Field(props: {
  id: string;
  label: string;
  value?: string | undefined;
  hint?: string;
  auto?: string;
}) {
  return (
    <p class="field">
      <label for={props.id}>{props.label}</label>
      <input id={props.id} name={props.id} value={props.value ?? ''} autocomplete={props.auto} />
      {props.hint ? <span class="hint">{props.hint}</span> : null}
    </p>
  );
}

export function ProfilePage(props: {
  profile: ProfileView;
  month: string;
  problems?: string[];
  saved?: boolean;
}) {
  const { profile } = props;
  const address = profile.address;
  const slots = Array.from({ length: TAX_ID_SLOTS }, (_, i) => profile.taxIds[i]);
  return (
    <Layout title="Billing profile" signedIn={true}>
      <BillingLinks month={props.month} />
      {props.saved ? (
        <p class="notice" role="status">
          Saved: the next invoices carry it.
        </p>
      ) : null}
      {props.problems?.length ? (
        <div class="error" role="alert">
          <p>Not saved:</p>
          <ul>
            {props.problems.map((problem) => (
              <li>{problem}</li>
            ))}
          </ul>
        </div>
      ) : null}
      <p class="hint">
        Every invoice carries these details: they apply to invoices made from now on, not to those already
        made.
      </p>
      <form method="post" action="/dashboard/billing/profile" class="profile">
        <Field id="legal_name" label="Legal name" value={profile.legalName} auto="organization" />
        <p class="field">
          <label for="contacts">Billing e-mails</label>
          <textarea id="contacts" name="contacts" rows={2}>
            {profile.contacts.join(', ')}
          </textarea>
          <span class="hint">
            Up to 5, separated by commas. Invoices are sent to the first; the others are kept as billing
            contacts.
          </span>
        </p>
        <fieldset>
          <legend>Address</legend>
          <Field id="line1" label="Address" value={address?.line1} auto="address-line1" />
          <Field id="line2" label="Address line 2" value={address?.line2} auto="address-line2" />
          <Field id="postal_code" label="Postal code" value={address?.postalCode} auto="postal-code" />
          <Field id="city" label="City" value={address?.city} auto="address-level2" />
          <Field id="state" label="State or region" value={address?.state} auto="address-level1" />
          <Field id="country" label="Country" value={address?.country} hint="Two letters: DE, US, GB…" />
        </fieldset>
        <fieldset>
          <legend>Tax IDs</legend>
          {slots.map((taxId, i) => (
            <p class="field tax-id">
              <label for={`tax_type_${i}`}>Tax ID {i + 1}</label>
              <select id={`tax_type_${i}`} name={`tax_type_${i}`} aria-label={`Tax ID ${i + 1} type`}>
                <option value="">Type…</option>
                {Object.entries(TAX_ID_TYPES).map(([type, kind]) => (
                  <option value={type} selected={taxId?.type === type}>
                    {kind.label}
                  </option>
                ))}
              </select>
              <input
                id={`tax_value_${i}`}
                name={`tax_value_${i}`}
                value={taxId?.value ?? ''}
                aria-label={`Tax ID ${i + 1} value`}
              />
            </p>
          ))}
        </fieldset>
        <Field
          id="po_number"
          label="PO number"
          value={profile.poNumber}
          hint="Printed on every invoice while it is set."
        />
        <button type="submit">Save</button>
      </form>
    </Layout>
  );
}

const STATUS: Record<string, string> = { paid: 'Paid', open: 'Due', draft: 'Draft', void: 'Void' };

export function InvoicesPage(props: { invoices: InvoiceView[]; month: string }) {
  return (
    <Layout title="Invoices" signedIn={true}>
      <BillingLinks month={props.month} />
      <p class="hint">
        An invoice for every top-up, auto top-ups included, carrying your billing profile as it was when it
        was made.
      </p>
      <table class="invoices stack">
        <caption>Invoices</caption>
        <thead>
          <tr>
            <th scope="col">Date</th>
            <th scope="col">Number</th>
            <th scope="col">For</th>
            <th scope="col" class="num">
              Amount
            </th>
            <th scope="col">Download</th>
          </tr>
        </thead>
        <tbody>
          {props.invoices.length === 0 ? (
            <tr>
              <td colspan={5}>No invoices yet: each top-up makes one.</td>
            </tr>
          ) : (
            props.invoices.map((invoice) => (
              <tr>
                <td data-label="Date" class="when">
                  {when(invoice.created).slice(0, 10)}
                </td>
                <td data-label="Number" class="long">
                  {invoice.number ?? '—'} <span class="hint">{STATUS[invoice.status] ?? invoice.status}</span>
                </td>
                <td data-label="For">{invoice.description ?? '—'}</td>
                <td data-label="Amount" class="num">
                  {invoice.currency === 'usd'
                    ? usd(BigInt(invoice.totalCents) * 10_000_000n)
                    : `${invoice.totalCents} ${invoice.currency}`}
                </td>
                <td data-label="Download">
                  {invoice.pdf ? <a href={invoice.pdf}>PDF</a> : null}
                  {invoice.pdf && invoice.hosted ? ' · ' : null}
                  {invoice.hosted ? <a href={invoice.hosted}>View</a> : null}
                </td>
              </tr>
            ))
          )}
        </tbody>
      </table>
    </Layout>
  );
}
