import { Function as CloudFrontFunction, FunctionCode, FunctionRuntime } from 'aws-cdk-lib/aws-cloudfront';
import type { Construct } from 'constructs';
import {
  AUTHORIZATION_SCHEME,
  BEARER_CREDENTIAL,
  KEY_ERRORS,
  KEY_PATTERN,
  KEY_WITHOUT_SCHEME,
  SCHEME_SHOWN_CHARS,
} from '../../functions/core/auth.js';
import { EXPOSED_HEADERS, preflightHeaders } from '../../functions/shared/cors.js';
import { MAX_REQUEST_BYTES, tooLargeBody } from '../../functions/shared/too-large.js';

/** Stands for the scheme in the message template (never in a header: a control character). */
const SCHEME_MARK = '\u0001';

const json = (value: unknown) => JSON.stringify(value);
const regex = (pattern: RegExp) => `new RegExp(${json(pattern.source)}, ${json(pattern.flags)})`;

/**
 * The viewer-request code, on every behaviour, in the cloudfront-js-2.0 runtime. A preflight
 * (OPTIONS) is answered here, 204 with exactly the headers a function answers it with (generated from
 * `preflightHeaders` in functions/shared/cors.ts): a browser sends it without a key, so passing it on
 * would let a keyless flood of preflights invoke the functions and take their reserved concurrency
 * from paying requests. Every other request must carry a well-formed `Authorization: Bearer
 * svc_live_...` key, by the rule the functions apply (functions/core/auth.ts, from whose patterns and
 * messages this code is generated): one without is answered 401 here, with the body the function
 * would give, so a keyless flood never reaches a function or the database. Then a body whose
 * Content-Length exceeds what a Function URL takes is answered 413 (Lambda would refuse it before the
 * function runs, with a bare `{"message":"Request Entity Too Large"}`); a chunked body has no
 * Content-Length: Lambda's own answer still applies to it. Each refusal is in OpenAI's error shape
 * with CloudFront's request id and the CORS headers, as every answer of the service. None of the
 * headers set is one CloudFront Functions may not add (CloudFront Developer Guide, "Restrictions on
 * all edge functions": disallowed and read-only headers).
 */
export function edgeFunctionCode(maxBytes = MAX_REQUEST_BYTES): string {
  return `var KEY = ${regex(KEY_PATTERN)};
var SCHEME = ${regex(AUTHORIZATION_SCHEME)};
var BEARER = ${regex(BEARER_CREDENTIAL)};
var BARE_KEY = ${regex(KEY_WITHOUT_SCHEME)};
var NO_SCHEME = ${json(json(KEY_ERRORS.noScheme().toBody()))};
var MISSING = ${json(json(KEY_ERRORS.missing().toBody()))};
var MALFORMED = ${json(json(KEY_ERRORS.malformed().toBody()))};
var UNSUPPORTED = ${json(KEY_ERRORS.scheme(SCHEME_MARK).toBody())};
var TOO_LARGE = ${json(json(tooLargeBody(maxBytes)))};
var PREFLIGHT = ${json(preflightHeaders(undefined))};

function answer(event, statusCode, statusDescription, body) {
  return {
    statusCode: statusCode,
    statusDescription: statusDescription,
    headers: {
      'content-type': { value: 'application/json' },
      'x-request-id': { value: event.context.requestId },
      'access-control-allow-origin': { value: '*' },
      'access-control-expose-headers': { value: ${json(EXPOSED_HEADERS)} }
    },
    body: { encoding: 'text', data: body }
  };
}

function preflight(request) {
  var headers = {};
  for (var name in PREFLIGHT) headers[name] = { value: PREFLIGHT[name] };
  var requested = request.headers['access-control-request-headers'];
  if (requested) headers['access-control-allow-headers'] = { value: requested.value };
  return { statusCode: 204, statusDescription: 'No Content', headers: headers };
}

function keyRefusal(header) {
  if (!header) return MISSING;
  if (BARE_KEY.test(header.trim())) return NO_SCHEME;
  var scheme = SCHEME.exec(header.trim());
  if (scheme && scheme[1].toLowerCase() !== 'bearer') {
    var body = JSON.parse(JSON.stringify(UNSUPPORTED));
    body.error.message = body.error.message.split(${json(SCHEME_MARK)}).join(scheme[1].slice(0, ${SCHEME_SHOWN_CHARS}));
    return JSON.stringify(body);
  }
  var bearer = BEARER.exec(header);
  if (!bearer || !KEY.test(bearer[1])) return MALFORMED;
  return undefined;
}

function handler(event) {
  var request = event.request;
  if (request.method === 'OPTIONS') return preflight(request);
  var authorization = request.headers.authorization;
  var refusal = keyRefusal(authorization ? authorization.value : undefined);
  if (refusal) return answer(event, 401, 'Unauthorized', refusal);
  var length = request.headers['content-length'];
  if (length && parseInt(length.value, 10) > ${maxBytes}) return answer(event, 413, 'Payload Too Large', TOO_LARGE);
  return request;
}`;
}

export function edgeFunction(scope: Construct): CloudFrontFunction {
  return new CloudFrontFunction(scope, 'ViewerRequest', {
    comment:
      'Answers preflights (204); refuses requests without a well-formed API key (401), oversized bodies (413)',
    runtime: FunctionRuntime.JS_2_0,
    code: FunctionCode.fromInline(edgeFunctionCode()),
  });
}
