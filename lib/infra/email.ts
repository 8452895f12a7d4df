/**
 * The stack's e-mail through Amazon SES, for the balance watch (balance-watch.ts) and the dashboard's
 * Cognito user pool (dashboard.ts): the sending identity with Easy DKIM, a configuration set that is
 * the identity's default (so every message, Cognito's included, goes through it), the grant SES v2
 * checks for a send, the sending authorization Cognito needs on the identity, and alarms on the
 * account's reputation. Deployed with the dashboard only (a stack with a custom domain).
 *
 * - The identity: the context value `emailIdentity` (a domain, or one address), default the sender's
 *   domain. A domain identity is verified by the three DKIM CNAME records SES gives (Easy DKIM,
 *   2048-bit keys; the stack outputs them as `EmailDkimRecords`); an address identity by the link SES
 *   mails to it.
 * - The sender: the context value `alertSender`, default `no-reply@<domainName>`; it must be covered
 *   by the identity (the identity itself, or an address of its domain).
 * - Bounces and complaints: the configuration set puts a hard-bounced or complaining address on the
 *   account-level suppression list (SuppressionOptions BOUNCE and COMPLAINT). SES then accepts a
 *   message to it and does not deliver it, so a suppressed customer's alert is dropped by SES and
 *   never retried by the watch; a message SES refuses outright for its recipient (MessageRejected
 *   naming it, BadRequestException) is dropped by the watch as permanent (functions/adapters/ses.ts).
 * - What SES checks on a send ("Identity and access management in Amazon SES",
 *   https://docs.aws.amazon.com/ses/latest/dg/control-user-access.html): `ses:SendEmail` on the
 *   sender's identity, on the configuration set the message uses (the identity's default one
 *   included), and, while the account is in the SES sandbox, on each recipient's identity. The grant
 *   is exactly those, conditioned on `ses:FromAddress` = the sender; the sandbox's recipients are the
 *   context value `sesSandboxRecipients` (verified identities, comma-separated; none by default, and
 *   none needed once production access is granted).
 * - Reputation: SES publishes the account's `Reputation.BounceRate` and `Reputation.ComplaintRate`
 *   (AWS/SES); AWS reviews an account at a 5% bounce rate and at a 0.1% complaint rate, and may pause
 *   its sending above 10% and 0.5% ("Sending review process FAQs",
 *   https://docs.aws.amazon.com/ses/latest/dg/faqs-enforcement.html). The alarms fire at those review
 *   thresholds.
 */
import { Arn, ArnFormat, CfnOutput, Duration, Stack } from 'aws-cdk-lib';
import { Alarm, ComparisonOperator, Metric, TreatMissingData } from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { UserPool } from 'aws-cdk-lib/aws-cognito';
import { type IGrantable, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import {
  ConfigurationSet,
  DkimIdentity,
  EasyDkimSigningKeyLength,
  EmailIdentity,
  Identity,
  SuppressionReasons,
} from 'aws-cdk-lib/aws-ses';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { AwsCustomResource, AwsCustomResourcePolicy, PhysicalResourceId } from 'aws-cdk-lib/custom-resources';
import { Construct } from 'constructs';

/** The account's reputation thresholds at which AWS reviews it (the module comment cites them). */
export const REPUTATION_ALARMS = { bounceRate: 0.05, complaintRate: 0.001 } as const;

const ADDRESS = /^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/;
const DOMAIN = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/i;

/** An e-mail address as SES takes it for a sender: one @, no spaces or angle brackets. */
function checkSender(sender: string): string {
  if (!ADDRESS.test(sender))
    throw new Error(`alertSender must be an e-mail address (a verified SES identity), got ${sender}`);
  return sender;
}

/** An SES identity: a domain or one address. */
function checkIdentity(identity: string): string {
  if (!ADDRESS.test(identity) && !DOMAIN.test(identity))
    throw new Error(`emailIdentity must be a domain or an e-mail address, got ${identity}`);
  return identity.toLowerCase();
}

/** The comma-separated identities of `sesSandboxRecipients`. */
function sandboxRecipientsOf(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map(checkIdentity);
}

export interface EmailSendingProps {
  /** The From address; default the context value `alertSender`, else `no-reply@<domainName>`. */
  sender?: string;
  /** The identity; default the context value `emailIdentity`, else the sender's domain. */
  identity?: string;
  /** The custom domain (the default sender's domain). */
  domainName: string;
}

export class EmailSending extends Construct {
  readonly sender: string;
  /** The identity's name: a domain or an address. */
  readonly identityName: string;
  readonly identity: EmailIdentity;
  readonly configurationSet: ConfigurationSet;
  readonly configurationSetName: string;
  /** The recipients' identities the grant covers while the account is in the SES sandbox. */
  readonly sandboxRecipients: string[];

  constructor(scope: Construct, id: string, props: EmailSendingProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const givenSender = props.sender ?? (this.node.tryGetContext('alertSender') as string | undefined);
    this.sender = checkSender(givenSender || `no-reply@${props.domainName}`);
    const givenIdentity = props.identity ?? (this.node.tryGetContext('emailIdentity') as string | undefined);
    this.identityName = checkIdentity(givenIdentity || (this.sender.split('@')[1] as string));
    const senderDomain = (this.sender.split('@')[1] as string).toLowerCase();
    if (this.identityName !== this.sender.toLowerCase() && this.identityName !== senderDomain)
      throw new Error(
        `the sender ${this.sender} is not covered by the SES identity ${this.identityName} (its address or its domain)`,
      );
    this.sandboxRecipients = sandboxRecipientsOf(
      this.node.tryGetContext('sesSandboxRecipients') as string | undefined,
    );

    // Named after the stack: one per stack in a region, and its ARN a literal for the grant.
    this.configurationSetName = `${stack.stackName}-email`;
    this.configurationSet = new ConfigurationSet(scope, 'EmailConfigurationSet', {
      configurationSetName: this.configurationSetName,
      suppressionReasons: SuppressionReasons.BOUNCES_AND_COMPLAINTS,
      reputationMetrics: true,
      sendingEnabled: true,
    });
    const isAddress = this.identityName.includes('@');
    this.identity = new EmailIdentity(scope, 'EmailIdentity', {
      identity: isAddress ? Identity.email(this.identityName) : Identity.domain(this.identityName),
      configurationSet: this.configurationSet,
      ...(isAddress
        ? {}
        : { dkimSigning: true, dkimIdentity: DkimIdentity.easyDkim(EasyDkimSigningKeyLength.RSA_2048_BIT) }),
    });
    if (!isAddress) {
      // Easy DKIM with 2048-bit keys: the three CNAME records to publish in the domain's DNS.
      const records = [1, 2, 3].map((i) => {
        const name = this.identity[`dkimDnsTokenName${i}` as 'dkimDnsTokenName1'];
        const value = this.identity[`dkimDnsTokenValue${i}` as 'dkimDnsTokenValue1'];
        return `${name} CNAME ${value}`;
      });
      new CfnOutput(scope, 'EmailDkimRecords', {
        value: stack.toJsonString(records),
        description: `The DNS records that verify ${this.identityName} for SES (Easy DKIM): publish all three`,
      });
    }
  }

  /** The ARN of an SES identity of this account and region. */
  identityArn(name: string): string {
    return Arn.format(
      { service: 'ses', resource: 'identity', resourceName: name, arnFormat: ArnFormat.SLASH_RESOURCE_NAME },
      Stack.of(this),
    );
  }

  get configurationSetArn(): string {
    return Arn.format(
      {
        service: 'ses',
        resource: 'configuration-set',
        resourceName: this.configurationSetName,
        arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
      },
      Stack.of(this),
    );
  }

  /**
   * What a role needs to send as the sender (the module comment says why each): `ses:SendEmail` on the
   * identity, the configuration set and the sandbox's recipient identities, from the sender only.
   */
  grantSend(grantee: IGrantable): void {
    grantee.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({
        actions: ['ses:SendEmail'],
        resources: [
          this.identityArn(this.identityName),
          this.configurationSetArn,
          ...this.sandboxRecipients.map((name) => this.identityArn(name)),
        ],
        conditions: { StringEquals: { 'ses:FromAddress': this.sender } },
      }),
    );
  }

  /**
   * The sending authorization policy Cognito needs to send a user pool's e-mail from this identity
   * ("Email settings for Amazon Cognito user pools", https://docs.aws.amazon.com/cognito/latest/developerguide/user-pool-email.html):
   * the service principal `email.cognito-idp.amazonaws.com` may SendEmail and SendRawEmail on the
   * identity, for this account's pool only (aws:SourceAccount, aws:SourceArn). CloudFormation has no
   * resource for an identity's policy, so SES v2's PutEmailIdentityPolicy is called at deploy
   * (DeleteEmailIdentityPolicy at removal).
   */
  allowCognito(userPool: UserPool): void {
    const stack = Stack.of(this);
    const policyName = 'cognito-user-pool';
    const document = {
      Version: '2012-10-17',
      Statement: [
        {
          Sid: 'CognitoUserPoolSends',
          Effect: 'Allow',
          Principal: { Service: 'email.cognito-idp.amazonaws.com' },
          Action: ['ses:SendEmail', 'ses:SendRawEmail'],
          Resource: this.identityArn(this.identityName),
          Condition: {
            StringEquals: { 'aws:SourceAccount': stack.account },
            ArnLike: { 'aws:SourceArn': userPool.userPoolArn },
          },
        },
      ],
    };
    const call = {
      service: 'SESV2',
      action: 'putEmailIdentityPolicy',
      parameters: {
        EmailIdentity: this.identityName,
        PolicyName: policyName,
        Policy: stack.toJsonString(document),
      },
      physicalResourceId: PhysicalResourceId.of(`${this.identityName}/${policyName}`),
    };
    const policy = new AwsCustomResource(this, 'CognitoSendingAuthorization', {
      onCreate: call,
      onUpdate: call,
      onDelete: {
        service: 'SESV2',
        action: 'deleteEmailIdentityPolicy',
        parameters: { EmailIdentity: this.identityName, PolicyName: policyName },
      },
      policy: AwsCustomResourcePolicy.fromStatements([
        new PolicyStatement({
          actions: ['ses:PutEmailIdentityPolicy', 'ses:DeleteEmailIdentityPolicy'],
          resources: [this.identityArn(this.identityName)],
        }),
      ]),
      installLatestAwsSdk: false,
    });
    policy.node.addDependency(this.identity);
  }

  /** Alarms on the account's bounce and complaint rates, at AWS's review thresholds. */
  alarmTo(topic: ITopic): void {
    const rate = (metricName: string) =>
      new Metric({ namespace: 'AWS/SES', metricName, statistic: 'Maximum', period: Duration.hours(1) });
    const shape = {
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      // No sends, no rate: nothing to alarm on.
      treatMissingData: TreatMissingData.NOT_BREACHING,
    };
    const alarms = [
      new Alarm(this, 'BounceRate', {
        metric: rate('Reputation.BounceRate'),
        threshold: REPUTATION_ALARMS.bounceRate,
        ...shape,
        alarmDescription:
          "SES's bounce rate for this account reached 5%, where AWS reviews the account (10% may pause its sending): the suppression list drops hard-bounced addresses; look for a source of bad addresses",
      }),
      new Alarm(this, 'ComplaintRate', {
        metric: rate('Reputation.ComplaintRate'),
        threshold: REPUTATION_ALARMS.complaintRate,
        ...shape,
        alarmDescription:
          "SES's complaint rate for this account reached 0.1%, where AWS reviews the account (0.5% may pause its sending): customers mark the alerts as spam",
      }),
    ];
    for (const alarm of alarms) alarm.addAlarmAction(new SnsAction(topic));
  }
}
