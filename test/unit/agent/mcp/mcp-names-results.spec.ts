import { mcpInputSchema, mcpNeedsApproval, mcpToolName } from '../../../../src/agent/mcp/mcp-names';
import { ToolRegistry } from '../../../../src/agent/tools';
import { McpToolError, mcpResult } from '../../../../src/agent/mcp/mcp-results';
import { ToolOutput } from '../../../../src/agent/tools';

describe('mcpToolName', () => {
  it('is <server>__<tool> when that is a valid tool name', () => {
    expect(mcpToolName('files', 'read_file')).toBe('files__read_file');
  });

  it('replaces characters outside [a-zA-Z0-9_-] with _', () => {
    expect(mcpToolName('gh', 'issues.list/open now')).toBe('gh__issues_list_open_now');
  });

  it('shortens names over 64 characters to 64, unique by a hash of the original', () => {
    const a = mcpToolName('server', 'x'.repeat(70));
    const b = mcpToolName('server', `${'x'.repeat(69)}y`);
    expect(a).toHaveLength(64);
    expect(b).toHaveLength(64);
    expect(a).not.toBe(b);
    expect(a).toMatch(/^[a-zA-Z0-9_-]{64}$/);
  });
});

describe('mcpNeedsApproval', () => {
  it('true: every tool of the server; a list: the tools it names (server names); else none', () => {
    expect(mcpNeedsApproval(true, 'read')).toBe(true);
    expect(mcpNeedsApproval(['delete'], 'delete')).toBe(true);
    expect(mcpNeedsApproval(['delete'], 'read')).toBe(false);
    expect(mcpNeedsApproval(false, 'read')).toBe(false);
    expect(mcpNeedsApproval(undefined, 'read')).toBe(false);
  });
});

describe('mcpInputSchema', () => {
  it('drops $schema, so a schema naming JSON Schema 2020-12 registers and validates', async () => {
    const schema = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: { path: { type: 'string' } },
      required: ['path'],
    };
    const registry = new ToolRegistry();
    expect(() =>
      registry.register({ name: 'raw', description: '', parameters: schema, handler: () => 1 }),
    ).toThrow(/invalid parameters/);
    registry.register({
      name: 'fixed',
      description: '',
      parameters: mcpInputSchema(schema),
      handler: () => 'ok',
    });
    const context = {
      sessionId: 's',
      turnId: 't',
      callId: 'c',
      acceptsImages: false,
      signal: new AbortController().signal,
    };
    expect((await registry.execute('fixed', {}, context)).ok).toBe(false);
    expect(await registry.execute('fixed', { path: '/' }, context)).toEqual({
      ok: true,
      content: 'ok',
    });
  });
});

describe('mcpResult', () => {
  it('text parts as text, joined by a blank line; structured content as JSON when no parts', () => {
    const parts = [
      { type: 'text' as const, text: 'one' },
      { type: 'text' as const, text: 'two' },
    ];
    expect(mcpResult({ content: parts }, false)).toBe('one\n\ntwo');
    expect(mcpResult({ content: [], structuredContent: { n: 1 } }, false)).toBe('{"n":1}');
  });

  it('audio, binary resources and resource links as bracketed notes', () => {
    const text = mcpResult(
      {
        content: [
          { type: 'audio', data: 'AAAA', mimeType: 'audio/wav' },
          { type: 'resource', resource: { uri: 'file:///a.bin', blob: 'AAAA' } },
          { type: 'resource_link', uri: 'file:///b.txt', name: 'b' },
        ],
      },
      true,
    );
    expect(typeof text).toBe('string');
    expect((text as string).split('\n\n')).toEqual([
      '[audio audio/wav, 3 bytes: not shown, this model does not accept audio]',
      '[resource file:///a.bin (binary): binary content not shown]',
      '[resource link file:///b.txt "b"]',
    ]);
  });

  it('an image: a note, and for a model that accepts images the image as a data URL', () => {
    const result = {
      content: [
        { type: 'text' as const, text: 'look' },
        { type: 'image' as const, data: 'iVBORw0K', mimeType: 'image/png' },
      ],
    };
    expect(mcpResult(result, false)).toBe(
      'look\n\n[image image/png, 6 bytes: not shown, this model does not accept images]',
    );
    const shown = mcpResult(result, true);
    expect(shown).toBeInstanceOf(ToolOutput);
    expect(shown).toEqual(
      new ToolOutput('look\n\n[image image/png, 6 bytes: shown after the tool results]', [
        'data:image/png;base64,iVBORw0K',
      ]),
    );
  });

  it('an error result throws McpToolError with its text', () => {
    const run = () => mcpResult({ isError: true, content: [{ type: 'text', text: 'no' }] }, false);
    expect(run).toThrow(McpToolError);
    expect(run).toThrow('no');
  });
});
