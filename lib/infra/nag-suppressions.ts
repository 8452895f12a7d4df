import { type Stack, Validations } from 'aws-cdk-lib';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';

/**
 * Every cdk-nag (AwsSolutions) finding this stack acknowledges as a whole, each with its reason. The
 * tests apply the same list, so an unacknowledged finding fails `npm test`. A wildcard resource
 * (AwsSolutions-IAM5) is never acknowledged here: each is acknowledged on the one policy that has it,
 * for that exact resource (XRAY_WILDCARD below; the table backups' in backup.ts).
 */
export const ACKNOWLEDGED = [
  {
    id: 'AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
    reason:
      'AWSLambdaBasicExecutionRole is the AWS-maintained minimum for a function to write its own logs; the data-plane permissions are explicit statements.',
  },
  {
    id: 'AwsSolutions::AwsSolutions-L1',
    reason:
      'Node.js 22 is the runtime this service is built and tested for (the conformance suite runs its bundles on it); moving runtimes is a tested change of its own.',
  },
  {
    id: 'AwsSolutions::AwsSolutions-SMG4',
    reason:
      'The upstream credentials are API keys issued by external providers (no rotation Lambda can mint them); the origin-verify value is shared with CloudFront and rotated by a redeploy; the usage-signing key is rotated by putting a new value (its previous version still verifies lines logged before).',
  },
  {
    id: 'AwsSolutions::AwsSolutions-CFR1',
    reason:
      'A paid API for callers worldwide, authenticated by API keys: no geographic restriction is wanted.',
  },
  {
    id: 'AwsSolutions::AwsSolutions-CFR2',
    reason:
      'The sandbox only: prod has a WAF web ACL in front of CloudFront unless deployed with -c waf=false (edge-waf.ts); a sandbox, called only by its own tests, can add one with -c waf=true.',
  },
  {
    id: 'AwsSolutions::AwsSolutions-CFR4',
    reason:
      'With the default *.cloudfront.net certificate CloudFront cannot set a minimum TLS version; deploy with -c domainName=... -c certificateArn=... to enforce TLS 1.2 (TLS_V1_2_2021).',
  },
  {
    id: 'AwsSolutions::AwsSolutions-COG2',
    reason:
      "The dashboard's user pool (only on a stack with a custom domain) offers TOTP MFA to every customer but does not require it: a customer signs up to buy credits and manage API keys. A dashboard session can spend (a new key spends the balance; auto top-up charges the saved card, up to $1,000 per crossing), so those two actions ask for a sign-in of the last 10 minutes (the password again, and the TOTP code where set: prompt=login, the ID token's auth_time checked) and are e-mailed to the account; requiring an authenticator app at sign-up is a decision for the product, made by setting mfa to ON in lib/infra/dashboard.ts.",
  },
  {
    id: 'AwsSolutions::AwsSolutions-COG8',
    reason:
      "The dashboard's user pool is on the Essentials feature plan (managed login, email sign-in, optional TOTP; $0.015 per monthly active user above 10,000 free). Sign-up abuse is bounded by the pre-sign-up trigger's caps per hour, per day and per e-mail domain (functions/sign-up-guard/) and the codes go out through SES, not Cognito's 50 a day. The Plus plan's threat protection (adaptive authentication, compromised-credential checks) is the option for account takeover: $0.020 per monthly active user with no free tier (https://aws.amazon.com/cognito/pricing/), set with featurePlan PLUS in lib/infra/dashboard.ts (docs/deploy.md, \"SES and Cognito e-mail\").",
  },
  {
    id: 'AwsSolutions::AwsSolutions-S1',
    reason: 'This bucket receives the CloudFront access logs; logging a log bucket to itself would loop.',
  },
] as const;

export function applyNagSuppressions(stack: Stack): void {
  Validations.of(stack).acknowledge(...ACKNOWLEDGED.map(({ id, reason }) => ({ id, reason })));
}

/** The X-Ray statement's wildcard, on a traced function's own policy. */
const XRAY_WILDCARD = {
  id: 'AwsSolutions::AwsSolutions-IAM5[Resource::*]',
  reason:
    'Active tracing adds xray:PutTraceSegments and xray:PutTelemetryRecords, which have no resource-level permissions (Service Authorization Reference, AWS X-Ray: no resource types for either), so their resource is *; every other statement of this policy names its table, index or secret.',
};

/**
 * Acknowledges the X-Ray wildcard on a traced function's default policy, and there only: a wildcard
 * anywhere else in the stack (another statement on another policy) is still a finding.
 */
export function acknowledgeXrayWildcard(fn: IFunction): void {
  const policy = fn.role?.node.tryFindChild('DefaultPolicy');
  if (!policy) throw new Error(`${fn.node.path}: no default policy to hold the X-Ray statement`);
  Validations.of(policy).acknowledge(XRAY_WILDCARD);
}
