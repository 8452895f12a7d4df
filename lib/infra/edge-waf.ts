import { type Stack, Token } from 'aws-cdk-lib';
import { CfnWebACL } from 'aws-cdk-lib/aws-wafv2';
import { EXPOSED_HEADERS } from '../../functions/shared/cors.js';

/** Requests one IP may send in 5 minutes before WAF answers it 429 (a flood guard, not a product limit). */
const DEFAULT_WAF_RATE_LIMIT = 6_000;

export interface EdgeWafOptions {
  /** On by default in prod, off in the sandbox (`-c waf=false` / `-c waf=true`). */
  enabled: boolean;
  /** A CLOUDFRONT-scope web ACL created elsewhere (in us-east-1): used instead of creating one. */
  webAclArn?: string | undefined;
  /** Requests per IP per 5 minutes (default DEFAULT_WAF_RATE_LIMIT). */
  rateLimit?: number | undefined;
}

const visibility = (metricName: string) => ({
  cloudWatchMetricsEnabled: true,
  metricName,
  sampledRequestsEnabled: true,
});

/**
 * The WAF web ACL in front of the distribution, as the ARN CloudFront takes (its `WebACLId`), or
 * undefined without one. Two rules: AWS's IP reputation list (addresses AWS threat intelligence has
 * seen in bots, reconnaissance and DDoS; blocked with WAF's 403), then a per-IP rate limit answered
 * 429 in OpenAI's error shape with the CORS headers.
 *
 * A web ACL of scope CLOUDFRONT exists only in us-east-1 (AWS WAF Developer Guide, "Resources that
 * you can protect": "you must use the Region US East (N. Virginia) to create your web ACL"), and
 * CloudFormation creates a stack's resources in the stack's own region. So the ACL is created here
 * only when the stack is in us-east-1 (or its region is left to deploy time: then it deploys only
 * there); a stack elsewhere takes the ARN of one created in us-east-1 (`-c webAclArn=...`) or opts out.
 */
export function edgeWebAclArn(stack: Stack, options: EdgeWafOptions): string | undefined {
  if (!options.enabled) return undefined;
  if (options.webAclArn) return options.webAclArn;
  if (!Token.isUnresolved(stack.region) && stack.region !== 'us-east-1') {
    throw new Error(
      `a CLOUDFRONT-scope WAF web ACL can only be created in us-east-1, and this stack deploys to ${stack.region}: ` +
        'deploy it in us-east-1, pass -c webAclArn=<ARN of a web ACL created in us-east-1>, or opt out with -c waf=false',
    );
  }
  const rateLimited = {
    error: {
      message: 'Too many requests from this address. Retry with exponential backoff.',
      type: 'rate_limit_error',
      param: null,
      code: 'rate_limit_exceeded',
    },
  };
  const acl = new CfnWebACL(stack, 'EdgeWaf', {
    scope: 'CLOUDFRONT',
    description: 'hosted-model-api: IP reputation and a per-IP rate limit in front of CloudFront',
    defaultAction: { allow: {} },
    visibilityConfig: visibility('HostedModelApiEdge'),
    customResponseBodies: {
      rateLimited: { contentType: 'APPLICATION_JSON', content: JSON.stringify(rateLimited) },
    },
    rules: [
      {
        name: 'IpReputation',
        priority: 0,
        overrideAction: { none: {} },
        statement: {
          managedRuleGroupStatement: { vendorName: 'AWS', name: 'AWSManagedRulesAmazonIpReputationList' },
        },
        visibilityConfig: visibility('IpReputation'),
      },
      {
        name: 'RatePerIp',
        priority: 1,
        action: {
          block: {
            customResponse: {
              responseCode: 429,
              customResponseBodyKey: 'rateLimited',
              responseHeaders: [
                { name: 'access-control-allow-origin', value: '*' },
                { name: 'access-control-expose-headers', value: EXPOSED_HEADERS },
              ],
            },
          },
        },
        statement: {
          rateBasedStatement: {
            aggregateKeyType: 'IP',
            evaluationWindowSec: 300,
            limit: options.rateLimit ?? DEFAULT_WAF_RATE_LIMIT,
          },
        },
        visibilityConfig: visibility('RatePerIp'),
      },
    ],
  });
  return acl.attrArn;
}
