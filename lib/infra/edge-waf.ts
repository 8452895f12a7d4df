import { type Stack, Token } from 'aws-cdk-lib';
import { CfnWebACL } from 'aws-cdk-lib/aws-wafv2';
import { PermissionDeniedError } from '../../functions/core/errors.js';
import { EXPOSED_HEADERS } from '../../functions/shared/cors.js';
import { ConfigurationError } from './configuration-error.js';
import { STRIPE_WEBHOOK_PATH } from './edge-routes.js';

/**
 * Requests without an `Authorization` header one IP may send in 5 minutes before WAF answers it 429
 * (a flood guard, not a product limit: requests with a key are never counted).
 */
const DEFAULT_WAF_RATE_LIMIT = 6_000;

/** The label namespace of AWS's IP reputation rule group, and the rules of it that block by default. */
const IP_REPUTATION_LABELS = 'awswaf:managed:aws:amazon-ip-list:';
const IP_REPUTATION_BLOCKING_RULES = ['AWSManagedIPReputationList', 'AWSManagedReconnaissanceList'];

/** The headers on each of WAF's own answers, as on every answer of the service: a browser may read it. */
const CORS_HEADERS = [
  { name: 'access-control-allow-origin', value: '*' },
  { name: 'access-control-expose-headers', value: EXPOSED_HEADERS },
];

export interface EdgeWafOptions {
  /** On by default in prod, off in the sandbox (`-c waf=false` / `-c waf=true`). */
  enabled: boolean;
  /** A CLOUDFRONT-scope web ACL created elsewhere (in us-east-1): used instead of creating one. */
  webAclArn?: string | undefined;
  /** Keyless requests per IP per 5 minutes (default DEFAULT_WAF_RATE_LIMIT). */
  rateLimit?: number | undefined;
}

const visibility = (metricName: string) => ({
  cloudWatchMetricsEnabled: true,
  metricName,
  sampledRequestsEnabled: true,
});

/**
 * The WAF web ACL in front of the distribution, as the ARN CloudFront takes (its `WebACLId`), or
 * undefined without one. Its blocks answer in OpenAI's error shape with the CORS headers:
 * - AWS's IP reputation list (addresses AWS threat intelligence has seen in bots, reconnaissance and
 *   DDoS), 403 `ip_blocked`. A managed rule group's own Block answers WAF's bare 403, so its blocking
 *   rules are overridden to Count (AWS WAF Developer Guide, "Overriding rule group actions in AWS
 *   WAF"), which still labels a matching request, and the next rule blocks on those labels with the
 *   custom response: the way AWS documents a custom response for a rule of a managed group (AWS
 *   re:Post Knowledge Center, "waf-managed-rules": set the managed rule to Count, then block on its
 *   label in a rule of your own). Only the rules that block by default are overridden and blocked on:
 *   `AWSManagedIPDDoSList` counts in the group's own definition (AWS WAF Developer Guide, "Rate limit
 *   the requests with specific labels") and still only counts. WAF ignores an override naming a rule
 *   the group does not have (AWS WAF API Reference, "RuleActionOverride"), so were a rule renamed it
 *   would block again with WAF's bare 403: still blocked;
 * - a per-IP rate limit answered 429 `rate_limit_exceeded`, counting only requests without an
 *   `Authorization` header, Stripe's webhook excepted (AWS WAF Developer Guide, "Rate limit the requests that are missing a
 *   specific header"); a request with a key is neither counted nor refused, even from an address
 *   over the limit ("Using scope-down statements in AWS WAF": "The containing rule only evaluates
 *   the requests that first match the scope-down statement"). Customers behind one NAT share an
 *   address, so a limit on every request from it would refuse paying requests. A limit per key
 *   instead (custom aggregation keys on the header) would skip keyless requests altogether, since
 *   "web requests that are missing any of the components specified in the aggregation keys are
 *   omitted from the rate-based rule evaluation" (AWS WAF API Reference,
 *   "RateBasedStatementCustomKey"), and would amount to a per-key rate limit, which the product does
 *   not have. A keyless request, a preflight included, is what a flood from one address is made of:
 *   the edge answers it without invoking a function, and this rule caps it per address. A request
 *   with a key is refused at the edge if malformed; one with a well-formed key that is unknown or
 *   revoked is not counted here and reaches the function, which refuses it after a key lookup.
 *   Stripe's deliveries to `/stripe/webhook` are keyless too, and come from a few Stripe addresses:
 *   counted, a burst of events (a batch of refunds, a retried backlog) past the limit would be
 *   refused, and Stripe would retry it for days. The webhook path is left out of the count (the
 *   exact path, untransformed: the only path CloudFront sends to the webhook). What bounds a flood on
 *   it instead is its function: the origin header (the bare URL is a 403), Stripe's signature (400
 *   with no write), and its reserved concurrency (lib/infra/payments.ts: past it, 429).
 *
 * A web ACL of scope CLOUDFRONT exists only in us-east-1 (AWS WAF Developer Guide, "Resources that
 * you can protect": "you must use the Region US East (N. Virginia) to create your web ACL"), and
 * CloudFormation creates a stack's resources in the stack's own region. So the ACL is created here
 * only when the stack deploys to us-east-1 (its own region, or for a stack without one the CDK CLI's,
 * where `cdk deploy` puts it); a stack elsewhere takes the ARN of one created in us-east-1
 * (`-c webAclArn=...`) or opts out.
 */
/**
 * Refuses a web ACL this stack would create outside us-east-1. `region` is where the stack deploys:
 * its own, or for a stack without one the CDK CLI's (where `cdk deploy` puts it); undefined when
 * neither is known (the ACL then deploys only in us-east-1).
 */
export function checkEdgeWafRegion(region: string | undefined, options: EdgeWafOptions): void {
  if (!options.enabled || options.webAclArn || region === undefined || region === 'us-east-1') return;
  throw new ConfigurationError(
    `a CLOUDFRONT-scope WAF web ACL can only be created in us-east-1, and this stack deploys to ${region}: ` +
      'deploy it in us-east-1, pass -c webAclArn=<ARN of a web ACL created in us-east-1>, or opt out with -c waf=false',
  );
}

export function edgeWebAclArn(stack: Stack, options: EdgeWafOptions): string | undefined {
  if (!options.enabled) return undefined;
  if (options.webAclArn) return options.webAclArn;
  checkEdgeWafRegion(Token.isUnresolved(stack.region) ? undefined : stack.region, options);
  const rateLimited = {
    error: {
      message: 'Too many requests from this address. Retry with exponential backoff.',
      type: 'rate_limit_error',
      param: null,
      code: 'rate_limit_exceeded',
    },
  };
  const ipBlocked = new PermissionDeniedError(
    'Requests from this address are blocked: AWS threat intelligence lists it as a source of bots or attacks.',
    'ip_blocked',
  ).toBody();
  const acl = new CfnWebACL(stack, 'EdgeWaf', {
    scope: 'CLOUDFRONT',
    description:
      'hosted-model-api: IP reputation and a per-IP rate limit on keyless requests in front of CloudFront',
    defaultAction: { allow: {} },
    visibilityConfig: visibility('HostedModelApiEdge'),
    customResponseBodies: {
      rateLimited: { contentType: 'APPLICATION_JSON', content: JSON.stringify(rateLimited) },
      ipBlocked: { contentType: 'APPLICATION_JSON', content: JSON.stringify(ipBlocked) },
    },
    rules: [
      {
        name: 'IpReputation',
        priority: 0,
        overrideAction: { none: {} },
        statement: {
          managedRuleGroupStatement: {
            vendorName: 'AWS',
            name: 'AWSManagedRulesAmazonIpReputationList',
            ruleActionOverrides: IP_REPUTATION_BLOCKING_RULES.map((name) => ({
              name,
              actionToUse: { count: {} },
            })),
          },
        },
        visibilityConfig: visibility('IpReputation'),
      },
      {
        name: 'IpReputationBlocked',
        priority: 1,
        action: {
          block: {
            customResponse: {
              responseCode: 403,
              customResponseBodyKey: 'ipBlocked',
              responseHeaders: CORS_HEADERS,
            },
          },
        },
        statement: {
          orStatement: {
            statements: IP_REPUTATION_BLOCKING_RULES.map((name) => ({
              labelMatchStatement: { scope: 'LABEL', key: `${IP_REPUTATION_LABELS}${name}` },
            })),
          },
        },
        visibilityConfig: visibility('IpReputationBlocked'),
      },
      {
        name: 'RatePerIp',
        priority: 2,
        action: {
          block: {
            customResponse: {
              responseCode: 429,
              customResponseBodyKey: 'rateLimited',
              responseHeaders: CORS_HEADERS,
            },
          },
        },
        statement: {
          rateBasedStatement: {
            aggregateKeyType: 'IP',
            evaluationWindowSec: 300,
            limit: options.rateLimit ?? DEFAULT_WAF_RATE_LIMIT,
            // Keyless (no `Authorization` header, or an empty one), and not Stripe's webhook.
            scopeDownStatement: {
              andStatement: {
                statements: [
                  {
                    notStatement: {
                      statement: {
                        sizeConstraintStatement: {
                          // The CDK passes `singleHeader` through as it is: CloudFormation's `Name`.
                          fieldToMatch: { singleHeader: { Name: 'authorization' } },
                          comparisonOperator: 'GT',
                          size: 0,
                          textTransformations: [{ priority: 0, type: 'NONE' }],
                        },
                      },
                    },
                  },
                  {
                    notStatement: {
                      statement: {
                        byteMatchStatement: {
                          fieldToMatch: { uriPath: {} },
                          positionalConstraint: 'EXACTLY',
                          searchString: STRIPE_WEBHOOK_PATH,
                          textTransformations: [{ priority: 0, type: 'NONE' }],
                        },
                      },
                    },
                  },
                ],
              },
            },
          },
        },
        visibilityConfig: visibility('RatePerIp'),
      },
    ],
  });
  return acl.attrArn;
}
