import { UserError, errorMessage } from '@fastkernels/core';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodError } from 'zod';

/** OpenAI's error types by status (the `type` field clients switch on). */
const TYPES: Record<number, string> = {
  400: 'invalid_request_error', 401: 'authentication_error', 404: 'not_found_error', 405: 'invalid_request_error',
  413: 'invalid_request_error', 415: 'invalid_request_error', 429: 'rate_limit_error', 503: 'service_unavailable', 500: 'server_error',
};

/** An error with its HTTP status, answered in OpenAI's shape: {error: {message, type, param, code}}. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

export function errorBody(status: number, message: string, param: string | null = null, code: string | null = null) {
  return { error: { message, type: TYPES[status] ?? (status < 500 ? 'invalid_request_error' : 'server_error'), param, code } };
}

/** A zod failure as one 400: every issue with its path (`messages.0.role: ...`), the first path as `param`. */
export function fromZod(e: ZodError): ApiError {
  const issues = e.issues.map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message));
  const first = e.issues[0]?.path.join('.') || null;
  return new ApiError(400, issues.join('; '), first);
}

/** What the client gets for any error thrown in a route (engine validation is a UserError: the client's fault). */
export function toApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  if (e instanceof UserError) return new ApiError(400, errorMessage(e), e.details.field ?? null);
  const fe = e as Partial<FastifyError>;
  // fastify's own errors: body too large (413), bad JSON (400), unsupported content type (415), empty JSON body (400)
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    const msg = fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE' ? `request body is larger than the server's limit (${fe.message})` : (fe.message ?? 'bad request');
    return new ApiError(fe.statusCode, msg, null, fe.code ?? null);
  }
  return new ApiError(500, errorMessage(e));
}

export function sendError(reply: FastifyReply, e: unknown, log?: (line: string) => void): FastifyReply {
  const a = toApiError(e);
  if (a.status >= 500) log?.(`error: ${a.message}`);
  if (reply.sent || reply.raw.headersSent) {
    reply.raw.end();
    return reply;
  }
  return reply.code(a.status).type('application/json').send(errorBody(a.status, a.message, a.param, a.code));
}

/** fastify's error handler: everything in OpenAI's shape, and client errors are never logged as crashes. */
export function errorHandler(log: (line: string) => void) {
  return (e: unknown, _req: FastifyRequest, reply: FastifyReply) => sendError(reply, e, log);
}
