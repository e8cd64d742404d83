import { defineModel } from '@standardagents/spec';
export default defineModel({
  name: 'calls',
  provider: 'scripted',
  model: 'demo',
  script: [{ thinking: 'hm' }, { tool_calls: [{ arguments: { a: 1 } }] }, { text: 'ok', extra: 1 }],
  capabilities: { supportsImages: 'no' },
});
