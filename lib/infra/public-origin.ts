/**
 * The deploy's public origin and the URLs a customer is sent to from it: the context values that name
 * them (`topUpUrl`, `dashboardOrigin`) are checked here before anything is built, so that a 402 never
 * points a customer at a placeholder and a dashboard never signs in on an origin it cannot serve.
 *
 * No CDK import: plain checks, each refusal a ConfigurationError (one line, bin/app.ts).
 */
import { ConfigurationError } from './configuration-error.js';

/**
 * Names that are never a deployment's own (RFC 2606 and RFC 6761): example.com, example.org and
 * example.net with their subdomains, and the reserved top-level names .example, .invalid, .test and
 * .localhost.
 */
export function isPlaceholderHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  return /(^|\.)example\.(com|org|net)$/.test(host) || /(^|\.)(example|invalid|test|localhost)$/.test(host);
}

/** `-c topUpUrl=<url>`: an https URL on a host that is not a placeholder; returned as given. */
export function checkTopUpUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigurationError(`topUpUrl must be an https URL where customers buy credits, got ${value}`);
  }
  if (url.protocol !== 'https:')
    throw new ConfigurationError(`topUpUrl must be an https URL where customers buy credits, got ${value}`);
  if (isPlaceholderHost(url.hostname))
    throw new ConfigurationError(
      `topUpUrl must be a page of your own where customers buy credits, not a placeholder (${url.hostname}): leave it out to use the dashboard's billing page`,
    );
  return value;
}

/**
 * `-c dashboardOrigin=<origin>`: where the dashboard is served without a custom domain, typically the
 * distribution's own `https://<id>.cloudfront.net`. An https origin (no path, query, fragment or
 * credentials) on a host that is not a placeholder; returned without a trailing slash.
 */
export function checkDashboardOrigin(value: string): string {
  const refuse = (why: string) =>
    new ConfigurationError(
      `dashboardOrigin must be an https origin with no path (the distribution's own https://<id>.cloudfront.net, from the first deploy's BaseUrl output): ${why}, got ${value}`,
    );
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw refuse('not a URL');
  }
  if (url.protocol !== 'https:') throw refuse('not https');
  if (url.username || url.password) throw refuse('it has credentials');
  if (url.pathname !== '/' || url.search || url.hash || /[?#]/.test(value))
    throw refuse('it has a path, query or fragment');
  if (isPlaceholderHost(url.hostname)) throw refuse(`${url.hostname} is a placeholder`);
  return url.origin;
}
