/**
 * The pre-sign-up limits of the dashboard's user pool: self sign-up is open and managed login's pages
 * cannot be put behind WAF, so a bot could sign up without end, each sign-up a verification e-mail
 * (and SES's quota, or Cognito's 50 a day). Every self sign-up (`PreSignUp_SignUp`; an administrator's
 * or a federated one is not limited) is counted against a cap per UTC hour, per UTC day and per
 * e-mail domain per UTC day (functions/adapters/dynamodb/sign-up.ts); over any, Cognito refuses the
 * sign-up with the message thrown here, before any e-mail is sent.
 */
import type { SignUpCaps, SignUpVerdict } from '../adapters/dynamodb/sign-up.js';

/** The defaults, and the CDK context values that change them (lib/infra/dashboard.ts). */
export const SIGN_UP_LIMIT_DEFAULTS: SignUpCaps = { perHour: 50, perDay: 300, perDomainPerDay: 50 };
export const SIGN_UP_LIMIT_ENV = {
  perHour: 'SIGN_UPS_PER_HOUR',
  perDay: 'SIGN_UPS_PER_DAY',
  perDomainPerDay: 'SIGN_UPS_PER_DOMAIN_PER_DAY',
} as const;

/** What the person signing up reads (Cognito shows it after "PreSignUp failed with error"). */
export const SIGN_UP_REFUSED = 'Too many sign-ups right now; please try again later.';

/** The part of Cognito's pre-sign-up event the guard reads. */
export interface PreSignUpEvent {
  triggerSource: string;
  request: { userAttributes: Record<string, string | undefined> };
}

export interface GuardDeps {
  counters: { admit(domain: string, now: Date, caps: SignUpCaps): Promise<SignUpVerdict> };
  caps: SignUpCaps;
  now: () => Date;
}

/** The caps from the environment (a positive integer each), else the defaults. */
export function capsFromEnv(env: NodeJS.ProcessEnv = process.env): SignUpCaps {
  const caps = { ...SIGN_UP_LIMIT_DEFAULTS };
  for (const [key, name] of Object.entries(SIGN_UP_LIMIT_ENV) as [keyof SignUpCaps, string][]) {
    const value = env[name];
    if (value === undefined || value === '') continue;
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got ${value}`);
    caps[key] = n;
  }
  return caps;
}

/** The e-mail address's domain, lower-cased (Cognito has checked it is an address). */
const domainOf = (email: string): string => email.slice(email.lastIndexOf('@') + 1).toLowerCase();

/** Returns the event to admit the sign-up; throws SIGN_UP_REFUSED to refuse it. */
export async function guardSignUp<E extends PreSignUpEvent>(event: E, deps: GuardDeps): Promise<E> {
  if (event.triggerSource !== 'PreSignUp_SignUp') return event;
  const domain = domainOf(event.request.userAttributes.email ?? '');
  const verdict = await deps.counters.admit(domain, deps.now(), deps.caps);
  if (!verdict.admitted) throw Object.assign(new Error(SIGN_UP_REFUSED), { limit: verdict.limit, domain });
  return event;
}
