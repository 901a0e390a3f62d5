/**
 * What a successful answer's body is, told by its headers and first bytes: the providers ask
 * for a stream, but proxies and misconfigured base URLs answer with JSON, HTML login pages or
 * nothing at all.
 */

/** The media type of a `content-type` header, lower case, without parameters (`''` if none). */
export function mediaType(header: string | null): string {
  return (header ?? '').split(';')[0].trim().toLowerCase();
}

/** Whether a media type is an event stream; no content type at all is taken as one. */
export function isEventStream(type: string): boolean {
  return !type || type === 'text/event-stream';
}

/** Whether a media type is JSON (`application/json`, `application/problem+json`, ...). */
export function isJson(type: string): boolean {
  return type === 'application/json' || type.endsWith('+json');
}

/** Whether a body has no bytes; reads at most its first chunk, then lets it go. */
export async function isEmpty(response: Response): Promise<boolean> {
  if (!response.body) return true;
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return true;
      if (value?.byteLength) return false;
    }
  } finally {
    reader.cancel().catch(() => undefined);
  }
}
