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
@media (max-width: 40rem) {
  header { flex-wrap: wrap; padding: .75rem 1rem; }
  main { padding: 1rem; }
  .copy input { min-width: 0; width: 100%; }
  table.stack thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  table.stack, table.stack tbody, table.stack tr, table.stack td { display: block; width: 100%; }
  table.stack tr { border-bottom: 1px solid #8886; padding: .4rem 0; }
  table.stack td { border: 0; padding: .15rem 0; overflow-wrap: anywhere; }
  table.stack td[data-label]::before { content: attr(data-label) ": "; font-weight: 600; }
}
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
`;

/** Copies the input a `data-copy` button names; the readonly input is selectable without it. */
export const COPY_SCRIPT = `document.addEventListener('click', function (event) {
  var button = event.target.closest && event.target.closest('button[data-copy]');
  if (!button) return;
  var input = document.getElementById(button.getAttribute('data-copy'));
  if (!input) return;
  input.select();
  var done = function () { button.textContent = 'Copied'; };
  if (navigator.clipboard) navigator.clipboard.writeText(input.value).then(done, function () {});
  else if (document.execCommand('copy')) done();
});
`;

/** The pages' icon (else a browser asks the site root's /favicon.ico, which is the API's: a 401). */
export const FAVICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1d4ed8"/></svg>`;
