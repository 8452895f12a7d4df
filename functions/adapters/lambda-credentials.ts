/**
 * The AWS SDK's default credential provider, as the function bundles have it: the environment's
 * variables only, which is where Lambda puts the function role's credentials
 * (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN). The bundles substitute this module
 * for @aws-sdk/credential-provider-node (BUNDLE_SETTINGS.alias, lib/infra/service-function.ts), whose
 * chain (profiles, SSO, web identity, process, container and instance metadata, with their STS and
 * SSO clients) is 133 KiB of the completions bundle that Lambda never reaches past its first link:
 * without it the bundle imported 8 ms faster on Node 22 (93 against 101 ms, median of 12 fresh
 * processes each). Tests and the local worker-thread runtime run the source, with the full chain.
 */
import { fromEnv } from '@aws-sdk/credential-provider-env';

/** Same signature as @aws-sdk/credential-provider-node's `defaultProvider`, which the SDK clients call. */
export const defaultProvider = (init?: Parameters<typeof fromEnv>[0]) => fromEnv(init);
