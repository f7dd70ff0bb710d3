/** HTTP status codes the relay and client use (protocol constants, not limits). */
export const HTTP_STATUS = {
  ok: 200,
  noContent: 204,
  badRequest: 400,
  unauthorized: 401,
  forbidden: 403,
  notFound: 404,
  methodNotAllowed: 405,
  requestTimeout: 408,
  payloadTooLarge: 413,
  tooManyRequests: 429,
  internalServerError: 500,
  unavailable: 503,
} as const;

/** 5xx: the server (or a gateway in front of it) failed. */
export function isServerErrorStatus(status: number): boolean {
  return status >= HTTP_STATUS.internalServerError && status < HTTP_STATUS.internalServerError + 100;
}

export function isSuccessStatus(status: number): boolean {
  return status >= HTTP_STATUS.ok && status < HTTP_STATUS.ok + 100;
}
