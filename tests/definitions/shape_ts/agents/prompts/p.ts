import { definePrompt } from '@standardagents/spec';
export default definePrompt({
  name: 'p',
  toolDescription: 'd',
  model: 'm',
  prompt: [{ type: 'text', content: 'a' }, { type: 'include', prompt: 'nope' }, { type: 'image' }],
  includeChat: 'yes',
  requiredSchema: { type: 'object', properties: { a: { type: 'strng' } } },
});
