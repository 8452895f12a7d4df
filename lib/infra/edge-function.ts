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
import { NotFoundError } from '../../functions/core/errors.js';
import { EXPOSED_HEADERS, preflightHeaders } from '../../functions/shared/cors.js';
import {
  API_BASE,
  BASE_ONLY,
  baseUrlHint,
  MISPLACED_PATH,
  ROOT_USE,
  SHOWN_CHARS,
  UNDER_V1,
} from '../../functions/shared/routing.js';
import { MAX_REQUEST_BYTES, tooLargeBody } from '../../functions/shared/too-large.js';

/** Stands for the scheme in the message template (never in a header: a control character). */
const SCHEME_MARK = '\u0001';
/** Stand for the path and what to use instead in the base-URL hint's template (never in a path). */
const PATH_MARK = '\u0002';
const USE_MARK = '\u0003';

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
 * would give, so a keyless flood never reaches a function or the database; except at a path whose
 * base URL is the mistake (`/`, `/chat/completions`, `/v1/models`...), answered the 404 the function
 * gives it (functions/shared/routing.ts, from whose patterns and message this code is generated),
 * which says the API is under /api/v1: a client set up with the wrong base URL learns that before
 * it has a key right. Then a body whose
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
var MISPLACED = ${regex(MISPLACED_PATH)};
var BASE_ONLY = ${regex(BASE_ONLY)};
var UNDER_V1 = ${regex(UNDER_V1)};
var HINT = ${json(new NotFoundError(baseUrlHint(PATH_MARK, USE_MARK)).toBody())};

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

function shown(path) {
  return path.length > ${SHOWN_CHARS} ? path.slice(0, ${SHOWN_CHARS}) + '...' : path;
}

function hint(uri) {
  var path = uri.replace(/\\/+$/, '');
  var misplaced = MISPLACED.exec(path);
  var use;
  if (misplaced && misplaced[1] !== ${json(API_BASE)}) use = shown(${json(API_BASE)} + misplaced[2]);
  else if (BASE_ONLY.test(path)) use = ${json(ROOT_USE)};
  else if (UNDER_V1.test(uri)) use = shown('/api' + uri);
  else return undefined;
  var body = JSON.parse(JSON.stringify(HINT));
  body.error.message = body.error.message.split(${json(PATH_MARK)}).join(shown(uri)).split(${json(USE_MARK)}).join(use);
  return JSON.stringify(body);
}

function handler(event) {
  var request = event.request;
  if (request.method === 'OPTIONS') return preflight(request);
  var authorization = request.headers.authorization;
  var refusal = keyRefusal(authorization ? authorization.value : undefined);
  if (refusal) {
    var notFound = hint(request.uri);
    if (notFound) return answer(event, 404, 'Not Found', notFound);
    return answer(event, 401, 'Unauthorized', refusal);
  }
  var length = request.headers['content-length'];
  if (length && parseInt(length.value, 10) > ${maxBytes}) return answer(event, 413, 'Payload Too Large', TOO_LARGE);
  return request;
}`;
}

export function edgeFunction(scope: Construct): CloudFrontFunction {
  return new CloudFrontFunction(scope, 'ViewerRequest', {
    comment:
      'Answers preflights (204); refuses requests without a well-formed API key (401, 404 at a wrong base URL), oversized bodies (413)',
    runtime: FunctionRuntime.JS_2_0,
    code: FunctionCode.fromInline(edgeFunctionCode()),
  });
}

/**
 * The viewer-request code of the dashboard's behaviours on a stack with a custom domain: a request
 * that reached the distribution by another name (its own `<id>.cloudfront.net`) at `/dashboard` or
 * `/dashboard/*` is sent to the same path and query on the custom domain, 301 for GET and HEAD and
 * 308 (the method and body kept) for any other. The dashboard knows one origin, the custom domain's
 * (its sign-in callback, its cookies, the origin check every form POST must pass), so on any other
 * name its sign-in cannot complete and its forms are refused. Any other request passes unchanged (the
 * API's behaviours do not run this code). The path and query are put back as CloudFront hands them
 * over, with a control character, a space or `#` written as %XX: the Location header may hold
 * none of them.
 */
export function dashboardHostCode(domainName: string): string {
  return `var DOMAIN = ${json(domainName.toLowerCase())};
var DASHBOARD = /^\\/dashboard(\\/|$)/;

function safe(text) {
  return text.replace(/[\\x00-\\x20\\x7f#]/g, function (c) {
    return '%' + ('0' + c.charCodeAt(0).toString(16).toUpperCase()).slice(-2);
  });
}

function query(querystring) {
  var pairs = [];
  for (var name in querystring) {
    var values = querystring[name].multiValue || [querystring[name]];
    for (var i = 0; i < values.length; i++)
      pairs.push(values[i].value === '' ? safe(name) : safe(name) + '=' + safe(values[i].value));
  }
  return pairs.length ? '?' + pairs.join('&') : '';
}

function handler(event) {
  var request = event.request;
  var host = request.headers.host;
  if (!host || host.value.toLowerCase().replace(/\\.$/, '') === DOMAIN) return request;
  if (!DASHBOARD.test(request.uri)) return request;
  var safeMethod = request.method === 'GET' || request.method === 'HEAD';
  return {
    statusCode: safeMethod ? 301 : 308,
    statusDescription: safeMethod ? 'Moved Permanently' : 'Permanent Redirect',
    headers: { location: { value: 'https://' + DOMAIN + safe(request.uri) + query(request.querystring) } }
  };
}`;
}

/** The dashboard behaviours' viewer-request function on a stack with a custom domain (dashboardHostCode). */
export function dashboardHostFunction(scope: Construct, domainName: string): CloudFrontFunction {
  return new CloudFrontFunction(scope, 'DashboardHost', {
    comment: `Redirects /dashboard on any other host name to ${domainName} (301, 308 for a POST)`,
    runtime: FunctionRuntime.JS_2_0,
    code: FunctionCode.fromInline(dashboardHostCode(domainName)),
  });
}
