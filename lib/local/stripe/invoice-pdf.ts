/**
 * The stand-in's invoice documents: a real, minimal PDF (one A4 page of Helvetica text, a valid
 * cross-reference table: any PDF reader opens it) and the hosted invoice page (plain HTML), each
 * made from the invoice object as it is.
 */
import type { StripeObject } from './state.js';

/** Exact dollars from cents: `$12.50`. */
const dollars = (cents: unknown): string => {
  const value = Number(cents) || 0;
  const abs = Math.abs(value);
  return `${value < 0 ? '-' : ''}$${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, '0')}`;
};

const day = (seconds: unknown) =>
  typeof seconds === 'number' ? new Date(seconds * 1000).toISOString().slice(0, 10) : '';

/** The invoice's text, line by line: who issued it, to whom, what for, how much, paid or not. */
function invoiceLines(invoice: StripeObject): string[] {
  const address = (invoice.customer_address ?? {}) as Record<string, string | null>;
  const taxIds = (invoice.customer_tax_ids ?? []) as { type: string; value: string }[];
  const fields = (invoice.custom_fields ?? []) as { name: string; value: string }[];
  const lines = ((invoice.lines as { data: StripeObject[] }).data ?? []).map(
    (line) => `${String(line.description ?? 'Item')}  ${dollars(line.amount)}`,
  );
  const paid = invoice.status === 'paid';
  return [
    `Invoice ${String(invoice.number ?? '(draft)')}`,
    `Date: ${day((invoice.status_transitions as { finalized_at?: number })?.finalized_at ?? invoice.created)}`,
    'Issued by: Stripe stand-in (local)',
    '',
    'Bill to:',
    ...[
      invoice.customer_name,
      address.line1,
      address.line2,
      [address.postal_code, address.city].filter(Boolean).join(' '),
      address.state,
      address.country,
      invoice.customer_email,
    ].filter((part): part is string => typeof part === 'string' && part !== ''),
    ...taxIds.map((taxId) => `Tax ID (${taxId.type}): ${taxId.value}`),
    ...fields.map((field) => `${field.name}: ${field.value}`),
    '',
    ...(invoice.description ? [String(invoice.description)] : []),
    ...lines,
    `Total: ${dollars(invoice.total)} ${String(invoice.currency).toUpperCase()}`,
    paid
      ? `Paid ${day((invoice.status_transitions as { paid_at?: number }).paid_at)}${
          invoice.amount_paid_off_stripe ? ' (outside Stripe)' : ''
        }`
      : `Amount due: ${dollars(invoice.amount_remaining)}`,
  ];
}

/** PDF text: printable ASCII, its delimiters escaped (anything else shown as `?`). */
const pdfText = (text: string) => text.replace(/[^\x20-\x7e]/g, '?').replace(/[\\()]/g, (c) => `\\${c}`);

/** A one-page PDF of `lines`. */
export function invoicePdf(invoice: StripeObject): Buffer {
  const text = invoiceLines(invoice)
    .map((line, i) => `${i === 0 ? '' : '0 -16 Td '}(${pdfText(line)}) Tj`)
    .join('\n');
  const content = `BT /F1 11 Tf 56 780 Td\n${text}\nET`;
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>',
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
    `<< /Length ${Buffer.byteLength(content, 'latin1')} >>\nstream\n${content}\nendstream`,
  ];
  let body = '%PDF-1.4\n';
  const offsets: number[] = [];
  for (const [i, object] of objects.entries()) {
    offsets.push(Buffer.byteLength(body, 'latin1'));
    body += `${i + 1} 0 obj\n${object}\nendobj\n`;
  }
  const xref = Buffer.byteLength(body, 'latin1');
  body += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) body += `${String(offset).padStart(10, '0')} 00000 n \n`;
  body += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(body, 'latin1');
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The hosted invoice page: the same text, and the PDF's link. */
export function invoicePage(invoice: StripeObject, pdfUrl: string): string {
  const lines = invoiceLines(invoice).map((line) => (line ? `<p>${escapeHtml(line)}</p>` : '<hr>'));
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Invoice (Stripe stand-in)</title></head>
<body>${lines.join('\n')}<p><a href="${escapeHtml(pdfUrl)}">Download PDF</a></p></body></html>`;
}
