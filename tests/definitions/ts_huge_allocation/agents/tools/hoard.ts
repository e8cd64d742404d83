import { defineTool } from '@standardagents/spec';

const rows: string[] = [];
for (let i = 0; ; i++) {
  rows.push('x'.repeat(1024) + i);
}

export default defineTool({ description: 'Never loads.', result: rows.join('') });
