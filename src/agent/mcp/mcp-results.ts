import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ToolOutput } from '../tools';

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

/** The text standing for an image or audio part. */
function mediaNote(kind: 'image' | 'audio', mimeType: string, data: string, shown: boolean) {
  const what = `${kind} ${mimeType}, ${sizeOf(data)}`;
  if (shown) return `[${what}: shown after the tool results]`;
  return `[${what}: not shown, this model does not accept ${kind === 'image' ? 'images' : 'audio'}]`;
}

function partText(part: Part, images: string[] | undefined): string {
  switch (part.type) {
    case 'text':
      return part.text;
    case 'image':
      images?.push(`data:${part.mimeType};base64,${part.data}`);
      return mediaNote('image', part.mimeType, part.data, images !== undefined);
    case 'audio':
      return mediaNote('audio', part.mimeType, part.data, false);
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
 * (text as is, an embedded resource as its text, audio or a binary resource as a bracketed
 * note); the structured content as JSON when there are no parts. An image is a note too, and,
 * when the model accepts images, an image of the `ToolOutput` (shown after the results). An
 * error result (`isError`) throws `McpToolError` with its text, so the call fails.
 */
export function mcpResult(result: CallToolResult, acceptsImages: boolean): string | ToolOutput {
  const parts = result.content ?? [];
  const images: string[] | undefined = acceptsImages ? [] : undefined;
  let text = parts.map((part) => partText(part, images)).join('\n\n');
  if (!parts.length && result.structuredContent !== undefined) {
    text = JSON.stringify(result.structuredContent);
  }
  if (result.isError) throw new McpToolError(text || 'the tool reported an error');
  return images?.length ? new ToolOutput(text, images) : text;
}
