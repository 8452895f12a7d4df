/**
 * A browser's part of an HTTP conversation, for tests that drive pages with fetch: a cookie jar per
 * origin (Set-Cookie stored, Max-Age=0 deleting, sent back to the same origin only), redirects
 * followed as browsers do (303 and a POST's 302 become GETs), and forms posted with the `Origin` of the
 * page they are on. Not a browser: no script, no SameSite or Secure enforcement.
 */
export interface Page {
  url: string;
  status: number;
  body: string;
  headers: Headers;
}

export class Browser {
  private readonly jars = new Map<string, Map<string, string>>();

  /** `send`: where requests go (default the network; a test may pass an app's in-process `request`). */
  constructor(private readonly send: (url: URL, init: RequestInit) => Promise<Response> = fetch) {}

  /** The cookies held for an origin, by name. */
  cookies(origin: string): Map<string, string> {
    let jar = this.jars.get(origin);
    if (!jar) {
      jar = new Map();
      this.jars.set(origin, jar);
    }
    return jar;
  }

  /** One request, no redirect followed; cookies sent and stored. */
  async fetch(
    url: string,
    init: {
      method?: string;
      form?: Record<string, string>;
      origin?: string;
      headers?: Record<string, string>;
    } = {},
  ): Promise<Response> {
    const target = new URL(url);
    const jar = this.cookies(target.origin);
    const headers: Record<string, string> = { ...init.headers };
    if (jar.size > 0) headers.cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
    if (init.origin) headers.origin = init.origin;
    let body: string | undefined;
    if (init.form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(init.form).toString();
    }
    const response = await this.send(target, {
      method: init.method ?? (body === undefined ? 'GET' : 'POST'),
      headers,
      redirect: 'manual',
      ...(body !== undefined ? { body } : {}),
    });
    for (const cookie of response.headers.getSetCookie()) {
      const [pair = '', ...attributes] = cookie.split(';');
      const at = pair.indexOf('=');
      const name = pair.slice(0, at).trim();
      const expired = attributes.some((a) => /^\s*max-age=0\s*$/i.test(a));
      if (expired) jar.delete(name);
      else jar.set(name, pair.slice(at + 1).trim());
    }
    return response;
  }

  /** A navigation: the request, then every redirect, to the page it ends on. */
  async open(url: string, init: { form?: Record<string, string>; origin?: string } = {}): Promise<Page> {
    let response = await this.fetch(url, init);
    let current = url;
    for (let hops = 0; hops < 20 && response.status >= 300 && response.status < 400; hops++) {
      current = new URL(String(response.headers.get('location')), current).href;
      await response.arrayBuffer();
      response = await this.fetch(current);
    }
    return { url: current, status: response.status, body: await response.text(), headers: response.headers };
  }

  /** Submits a page's form (found by its action) with `fields`, as the page's own origin. */
  async submit(page: Page, action: string, fields: Record<string, string>): Promise<Page> {
    const target = new URL(action, page.url);
    return this.open(target.href, { form: fields, origin: new URL(page.url).origin });
  }
}

/** The `action` of the first POST form of a page whose action matches. */
export function formAction(html: string, pattern: RegExp): string {
  for (const match of html.matchAll(/<form[^>]*method="post"[^>]*action="([^"]+)"/g)) {
    const action = (match[1] ?? '').replaceAll('&amp;', '&');
    if (pattern.test(action)) return action;
  }
  throw new Error(`no form matching ${pattern} on the page:\n${html.slice(0, 2000)}`);
}
