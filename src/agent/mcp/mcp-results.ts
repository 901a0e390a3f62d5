import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

type Part = CallToolResult['content'][number];

/** An MCP tool's error result (`isError: true`): its text is what the model reads. */
export class McpToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'McpToolError';
  }
}

const sizeOf = (base64: string) => {
  const bytes = Math.floor((base64.length * 3) / 4);
  return bytes >= 1024 ? `${Math.round(bytes / 1024)} KB` : `${bytes} bytes`;
};

/**
 * The placeholder of an image or audio part. Tool results reach the model as text today (the
 * engine has no image parts in tool messages yet), so a model that accepts images is told the
 * same thing as one that does not, with the reason.
 */
function mediaNote(kind: 'image' | 'audio', mimeType: string, data: string, images: boolean) {
  const why =
    kind === 'image' && images
      ? 'images in tool results are not passed to the model yet'
      : `this model does not accept ${kind === 'image' ? 'images' : 'audio'}`;
  return `[${kind} ${mimeType}, ${sizeOf(data)}: not shown, ${why}]`;
}

function partText(part: Part, acceptsImages: boolean): string {
  switch (part.type) {
    case 'text':
      return part.text;
    case 'image':
    case 'audio':
      return mediaNote(part.type, part.mimeType, part.data, acceptsImages);
    case 'resource': {
      const { resource } = part;
      if ('text' in resource && typeof resource.text === 'string') return resource.text;
      const type = resource.mimeType ?? 'binary';
      return `[resource ${resource.uri} (${type}): binary content not shown]`;
    }
    case 'resource_link':
      return `[resource link ${part.uri}${part.name ? ` "${part.name}"` : ''}]`;
    default:
      return JSON.stringify(part);
  }
}

/**
 * What the model receives from an MCP tool's result: its parts as text, one after the other
 * (text as is, an embedded resource as its text, an image, audio or binary resource as a
 * bracketed note); the structured content as JSON when there are no parts. An error result
 * (`isError`) throws `McpToolError` with that text, so the registry reports a failed call.
 */
export function mcpResultText(result: CallToolResult, acceptsImages: boolean): string {
  const parts = result.content ?? [];
  let text = parts.map((part) => partText(part, acceptsImages)).join('\n\n');
  if (!parts.length && result.structuredContent !== undefined) {
    text = JSON.stringify(result.structuredContent);
  }
  if (result.isError) throw new McpToolError(text || 'the tool reported an error');
  return text;
}
