import { beforeAll, describe, expect, it } from 'vitest';
import { EXPOSED_HEADERS } from '../../functions/shared/cors.js';
import { PROD_PROPS, resources, synthOffline } from './synth-offline.js';

/**
 * The prod stack's WAF web ACL as synthesized (PROD_PROPS leaves the region to deploy time, so the
 * stack creates the ACL), and what its rules do to a request, evaluated as WAF evaluates them.
 */

type Statement = Record<string, unknown>;
interface Rule {
  Name: string;
  Priority: number;
  Statement: Statement;
  Action?: { Block?: { CustomResponse: CustomResponse } };
  OverrideAction?: unknown;
}
interface CustomResponse {
  ResponseCode: number;
  CustomResponseBodyKey: string;
  ResponseHeaders: { Name: string; Value: string }[];
}
interface WebAcl {
  Rules: Rule[];
  CustomResponseBodies: Record<string, { ContentType: string; Content: string }>;
}

/**
 * A request as a WAF rule sees it: headers (lower-case names), the labels earlier rules added, and
 * its URI path (an API path unless given).
 */
interface Seen {
  headers: Record<string, string>;
  labels: string[];
  path?: string;
}

/**
 * Whether a statement matches, for the statement types the ACL's own rules use. A component the
 * request lacks matches nothing (AWS WAF Developer Guide, "Request components in AWS WAF": "Unless
 * otherwise noted, if a web request doesn't have the request component that's specified in the rule
 * statement, AWS WAF evaluates the request as not matching the rule criteria").
 */
function matches(statement: Statement, request: Seen): boolean {
  const [type, body] = Object.entries(statement)[0] as [string, Record<string, unknown>];
  switch (type) {
    case 'NotStatement':
      return !matches(body.Statement as Statement, request);
    case 'OrStatement':
      return (body.Statements as Statement[]).some((s) => matches(s, request));
    case 'AndStatement':
      return (body.Statements as Statement[]).every((s) => matches(s, request));
    case 'ByteMatchStatement': {
      // The URI path only, untransformed: what the ACL's own rules match on.
      expect(body.FieldToMatch).toEqual({ UriPath: {} });
      expect(body.TextTransformations).toEqual([{ Priority: 0, Type: 'NONE' }]);
      const path = request.path ?? '/api/v1/models';
      const search = body.SearchString as string;
      const compare: Record<string, boolean> = {
        EXACTLY: path === search,
        STARTS_WITH: path.startsWith(search),
        ENDS_WITH: path.endsWith(search),
        CONTAINS: path.includes(search),
      };
      return compare[body.PositionalConstraint as string] as boolean;
    }
    case 'LabelMatchStatement':
      expect(body.Scope).toBe('LABEL');
      return request.labels.includes(body.Key as string);
    case 'SizeConstraintStatement': {
      const field = body.FieldToMatch as { SingleHeader?: { Name: string } };
      // CloudFormation's own casing: the CDK passes `SingleHeader`'s content through unchanged.
      expect(Object.keys(field.SingleHeader ?? {}), 'a single header, by its Name').toEqual(['Name']);
      expect(body.TextTransformations).toEqual([{ Priority: 0, Type: 'NONE' }]);
      const value = request.headers[(field.SingleHeader as { Name: string }).Name.toLowerCase()];
      if (value === undefined) return false;
      const size = Buffer.byteLength(value);
      const limit = body.Size as number;
      const compare: Record<string, boolean> = {
        EQ: size === limit,
        NE: size !== limit,
        LE: size <= limit,
        LT: size < limit,
        GE: size >= limit,
        GT: size > limit,
      };
      return compare[body.ComparisonOperator as string] as boolean;
    }
    default:
      throw new Error(`a statement this test does not evaluate: ${type}`);
  }
}

const IP_LIST = 'awswaf:managed:aws:amazon-ip-list:';
const KEY = `Bearer svc_live_${'a1B2'.repeat(10)}xyz`;

let acl: WebAcl;
beforeAll(() => {
  const acls = Object.values(resources(synthOffline(PROD_PROPS).template)).filter(
    (r) => r.Type === 'AWS::WAFv2::WebACL',
  );
  expect(acls).toHaveLength(1);
  acl = acls[0]?.Properties as unknown as WebAcl;
}, 240_000);

const rule = (name: string) => {
  const found = acl.Rules.find((r) => r.Name === name);
  if (!found) throw new Error(`no rule ${name}`);
  return found;
};
const headersOf = (response: CustomResponse) =>
  Object.fromEntries(response.ResponseHeaders.map((h) => [h.Name, h.Value]));
const blockOf = (name: string) => rule(name).Action?.Block?.CustomResponse as CustomResponse;

describe("the edge WAF: AWS's IP reputation list", () => {
  it('leaves the blocking to a rule of its own: the group only labels', () => {
    const group = rule('IpReputation');
    expect(group.OverrideAction).toEqual({ None: {} });
    expect(group.Statement).toEqual({
      ManagedRuleGroupStatement: {
        VendorName: 'AWS',
        Name: 'AWSManagedRulesAmazonIpReputationList',
        // The rules that block in the group's own definition; WAF ignores a misspelled name silently.
        RuleActionOverrides: [
          { Name: 'AWSManagedIPReputationList', ActionToUse: { Count: {} } },
          { Name: 'AWSManagedReconnaissanceList', ActionToUse: { Count: {} } },
        ],
      },
    });
  });

  it.each([
    ['a bot list address', ['AWSManagedIPReputationList'], true],
    ['a reconnaissance list address', ['AWSManagedReconnaissanceList'], true],
    ['an address on both', ['AWSManagedIPReputationList', 'AWSManagedReconnaissanceList'], true],
    ['a DDoS list address (the group only counts it)', ['AWSManagedIPDDoSList'], false],
    ['an address on no list', [], false],
  ])('blocks %s after the group labels it: %s', (_name, lists, blocked) => {
    const blocking = rule('IpReputationBlocked');
    // Labels are seen only by rules evaluated after the rule that adds them.
    expect(blocking.Priority).toBeGreaterThan(rule('IpReputation').Priority);
    const request = { headers: { authorization: KEY }, labels: lists.map((l) => `${IP_LIST}${l}`) };
    expect(matches(blocking.Statement, request)).toBe(blocked);
  });

  it("answers 403 in OpenAI's error shape with the CORS headers, as the rate limit's 429", () => {
    const block = blockOf('IpReputationBlocked');
    expect(block.ResponseCode).toBe(403);
    expect(headersOf(block)).toEqual({
      'access-control-allow-origin': '*',
      'access-control-expose-headers': EXPOSED_HEADERS,
    });
    expect(headersOf(block)).toEqual(headersOf(blockOf('RatePerIp')));
    const body = acl.CustomResponseBodies[block.CustomResponseBodyKey];
    expect(body?.ContentType).toBe('APPLICATION_JSON');
    expect(JSON.parse(body?.Content ?? '')).toEqual({
      error: { message: expect.any(String), type: 'permission_error', param: null, code: 'ip_blocked' },
    });
  });
});

describe('the edge WAF: the rate limit', () => {
  const rate = () =>
    rule('RatePerIp').Statement.RateBasedStatement as {
      AggregateKeyType: string;
      Limit: number;
      EvaluationWindowSec: number;
      ScopeDownStatement: Statement;
      CustomKeys?: unknown;
    };

  it('counts per IP, 6,000 in 5 minutes by default', () => {
    expect(rate()).toMatchObject({ AggregateKeyType: 'IP', Limit: 6_000, EvaluationWindowSec: 300 });
    expect(rate().CustomKeys).toBeUndefined();
  });

  it.each([
    ['no Authorization header', {}, true],
    ['an empty one', { authorization: '' }, true],
    ['a key', { authorization: KEY }, false],
    ['a malformed one (refused at the edge)', { authorization: 'Basic dXNlcjpwYXNz' }, false],
  ])('counts a request with %s: %s', (_name, headers, counted) => {
    // A preflight is keyless too: counted, whatever its other headers.
    for (const extra of [{}, { 'access-control-request-method': 'POST', origin: 'https://app.example.com' }])
      expect(matches(rate().ScopeDownStatement, { headers: { ...extra, ...headers }, labels: [] })).toBe(
        counted,
      );
  });

  it.each([
    ["Stripe's webhook", '/stripe/webhook', false],
    ["the path with a trailing slash (not the webhook: the API's 404)", '/stripe/webhook/', true],
    ['an API path', '/api/v1/chat/completions', true],
    ['a dashboard page', '/dashboard/billing', true],
  ])('counts a keyless POST to %s (%s): %s', (_name, path, counted) => {
    // Stripe's deliveries carry no Authorization header: counted, every event past the limit from
    // Stripe's few addresses would be refused. Its function refuses what is not signed, and runs at
    // most its reserved concurrency at once.
    expect(matches(rate().ScopeDownStatement, { headers: {}, labels: [], path })).toBe(counted);
    expect(matches(rate().ScopeDownStatement, { headers: { authorization: KEY }, labels: [], path })).toBe(
      false,
    );
  });

  it("answers 429 in OpenAI's error shape", () => {
    const block = blockOf('RatePerIp');
    expect(block.ResponseCode).toBe(429);
    expect(JSON.parse(acl.CustomResponseBodies[block.CustomResponseBodyKey]?.Content ?? '')).toEqual({
      error: {
        message: expect.any(String),
        type: 'rate_limit_error',
        param: null,
        code: 'rate_limit_exceeded',
      },
    });
  });
});
