/**
 * Secrets Manager's GetSecretValue spoken directly, as wire.ts speaks DynamoDB: its JSON 1.1 protocol
 * (`X-Amz-Target: secretsmanager.GetSecretValue`) to `secretsmanager.<region>.amazonaws.com`, signed
 * with SigV4 over Node's kept-alive connections by aws-call.ts: the function bundles carry none of the
 * SDK's client (docs/performance.md). The SDK client's bounds as secrets.ts had them: 1 s to connect,
 * 2 s for the answer's head and of silence in its body, 3 attempts, network failures, 5xx and
 * throttling retried with full-jitter backoff, nothing else. A failed call is an Error named by Secrets Manager's code
 * (ResourceNotFoundException, AccessDeniedException...), as the SDK names it.
 */
import { type AwsEndpoint, callAws } from './aws-call.js';

/** `url`: `https://secretsmanager.<region>.amazonaws.com` (a test's own server elsewhere). */
export type Where = AwsEndpoint;

/** The secret's string value at `versionStage` (undefined for a binary secret). */
export async function getSecretValue(
  where: Where,
  secretId: string,
  versionStage: string,
): Promise<string | undefined> {
  const text = await callAws(where, {
    service: 'secretsmanager',
    path: '/',
    headers: {
      'content-type': 'application/x-amz-json-1.1',
      'x-amz-target': 'secretsmanager.GetSecretValue',
    },
    body: JSON.stringify({ SecretId: secretId, VersionStage: versionStage }),
    timeoutMs: 2_000,
    // A secret value is at most 64 KiB; its answer's JSON, a little more.
    maxAnswerBytes: 1024 * 1024,
    attempts: 3,
    backoffBaseMs: 50,
  });
  return (JSON.parse(text) as { SecretString?: string }).SecretString;
}
