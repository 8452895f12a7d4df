/**
 * The two files the pages load: a small stylesheet, and the copy button's script (no inline script:
 * the CSP allows scripts from this origin only). Served by the function itself, cacheable for an hour.
 */

export const STYLESHEET = `
:root { color-scheme: light dark; --accent: #2457d6; --danger: #b42318; --muted: #667085; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, sans-serif; }
header { display: flex; align-items: center; justify-content: space-between; gap: 1rem;
  padding: .75rem 1.5rem; border-bottom: 1px solid #8884; }
header nav { display: flex; align-items: center; gap: .5rem 1rem; flex-wrap: wrap; }
header form { margin: 0; }
.brand { font-weight: 600; text-decoration: none; }
.who { font-size: .9em; overflow-wrap: anywhere; }
main { max-width: 60rem; margin: 0 auto; padding: 1.5rem; }
a { color: var(--accent); }
table { width: 100%; border-collapse: collapse; margin: 1.5rem 0; }
caption { text-align: left; font-weight: 600; padding-bottom: .5rem; }
th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid #8883; }
td form { margin: 0; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
button, .button { font: inherit; padding: .4rem .9rem; border-radius: 6px; border: 1px solid var(--accent);
  background: var(--accent); color: #fff; cursor: pointer; text-decoration: none; display: inline-block; }
button.link { background: none; border: none; color: var(--accent); padding: 0; }
button.danger { background: none; color: var(--danger); border-color: var(--danger); }
details.confirm { display: inline-block; }
details.confirm summary { list-style: none; cursor: pointer; color: var(--danger); border: 1px solid var(--danger);
  border-radius: 6px; padding: .4rem .9rem; display: inline-block; }
details.confirm summary::-webkit-details-marker { display: none; }
details.confirm[open] summary { background: #b4231814; }
details.confirm form { margin: .5rem 0 0; max-width: 22rem; }
details.confirm p { margin: 0 0 .5rem; }
input, select { font: inherit; padding: .35rem .5rem; border: 1px solid #8888; border-radius: 6px; max-width: 100%; }
.actions { display: flex; gap: .5rem; flex-wrap: wrap; align-items: center; }
.switcher { display: flex; gap: .25rem; align-items: center; }
.switcher button { padding: .25rem .6rem; }
form.inline, form.amounts, .copy { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; }
.copy input { flex: 1; min-width: 24rem; font-family: ui-monospace, monospace; }
.notice { border: 1px solid var(--accent); border-radius: 8px; padding: 0 1rem; margin-bottom: 1.5rem; }
.error { color: var(--danger); font-weight: 600; }
.hint { color: var(--muted); }
.balance { font-size: 1.3em; }
button.secondary { background: none; color: var(--accent); padding: .15rem .6rem; font-size: .9em; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(14rem, 1fr)); gap: 1rem; margin: 1rem 0 1.5rem; }
.card { border: 1px solid #8884; border-radius: 10px; padding: .9rem 1.1rem; }
.card h2 { font-size: .95rem; font-weight: 600; color: var(--muted); margin: 0; }
.figure { font-size: 1.6rem; font-weight: 650; margin: .2rem 0 .4rem; font-variant-numeric: tabular-nums; }
.chart { margin: 0 0 1rem; }
.chart > svg { display: block; max-width: 100%; height: auto; }
.legend svg { vertical-align: baseline; }
.legend { margin-right: .8rem; white-space: nowrap; }
.snippet { border: 1px solid #8884; border-radius: 8px; margin: .75rem 0; overflow: hidden; }
.snippet-head { display: flex; justify-content: space-between; align-items: center; padding: .3rem .75rem;
  border-bottom: 1px solid #8884; font-size: .9em; color: var(--muted); }
pre { margin: 0; padding: .75rem; overflow-x: auto; font: 13px/1.45 ui-monospace, monospace; }
code { font-family: ui-monospace, monospace; font-size: .92em; overflow-wrap: anywhere; }
.table-scroll { overflow-x: auto; }
table.stack td { overflow-wrap: break-word; }
table.stack td.long { overflow-wrap: anywhere; }
table.stack td.when, table.stack td code { white-space: nowrap; overflow-wrap: normal; }
@media (max-width: 40rem) {
  header { flex-wrap: wrap; padding: .6rem 1rem; gap: .4rem 1rem; }
  header nav { flex-wrap: wrap; gap: .4rem .9rem; }
  main { padding: 1rem; }
  h1 { font-size: 1.5rem; }
  table { display: block; overflow-x: auto; }
  caption { max-width: calc(100vw - 2rem); }
  .chart text { font-size: 20px; }
  .copy input { min-width: 0; width: 100%; }
  table.stack thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  table.stack, table.stack tbody, table.stack tr, table.stack td { display: block; width: 100%; }
  table.stack tr { border-bottom: 1px solid #8886; padding: .4rem 0; }
  table.stack td { border: 0; padding: .15rem 0; overflow-wrap: anywhere; }
  table.stack td.when { white-space: normal; }
  table.stack td.num { text-align: left; }
  table.stack td[data-label]::before { content: attr(data-label) ": "; font-weight: 600; }
  table.stack caption { display: block; max-width: none; }
}
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
nav.sub { display: flex; flex-wrap: wrap; gap: .25rem 1rem; margin: 1rem 0; }
form.profile { max-width: 36rem; }
form.profile .field { display: flex; flex-direction: column; gap: .2rem; margin: 0 0 .8rem; }
form.profile fieldset { border: 1px solid #8884; border-radius: 8px; margin: 0 0 1rem; padding: .5rem 1rem; }
form.profile .tax-id { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: .4rem; }
form.profile .tax-id label { grid-column: 1 / -1; }
textarea, select { font: inherit; padding: .35rem .5rem; border: 1px solid #8888; border-radius: 6px; max-width: 100%; }
td.wrap, td code { overflow-wrap: anywhere; }
.statement-totals tr.total th, .statement-totals tr.total td { font-weight: 600; border-top: 2px solid #8888; }
@media (max-width: 40rem) {
  header { flex-wrap: wrap; padding: .75rem 1rem; } header nav { flex-wrap: wrap; gap: .25rem .8rem; }
  main { padding: 1rem; } th, td { padding: .35rem .3rem; }
}
@media print {
  header, nav.sub, .no-print, form { display: none; } main { max-width: none; padding: 0; }
  body { font-size: 11pt; color: #000; } a { color: inherit; text-decoration: none; }
}
`;

/**
 * Copies what a `data-copy` button names: an input's value (a new key; the readonly input is
 * selectable without it) or an element's text (the Overview's base URL and snippets).
 */
export const COPY_SCRIPT = `document.addEventListener('click', function (event) {
  var button = event.target.closest && event.target.closest('button[data-copy]');
  if (!button) return;
  var target = document.getElementById(button.getAttribute('data-copy'));
  if (!target) return;
  var text = 'value' in target ? target.value : target.textContent;
  if (target.select) target.select();
  var done = function () { button.textContent = 'Copied'; };
  if (navigator.clipboard) navigator.clipboard.writeText(text).then(done, function () {});
  else if (target.select && document.execCommand('copy')) done();
});
`;

/** The pages' icon (else a browser asks the site root's /favicon.ico, which is the API's: a 401). */
export const FAVICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1d4ed8"/></svg>`;
