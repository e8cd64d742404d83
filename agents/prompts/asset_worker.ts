import { definePrompt } from '@standardagents/spec';

export default definePrompt({
  name: 'asset_worker',
  toolDescription: 'Produces a top-down game asset from a brief.',
  model: 'worker_demo',
  includeChat: true,
  requiredSchema: {
    type: 'object',
    properties: {
      brief: { type: 'string', description: 'What the asset must show.' },
    },
    required: ['brief'],
  },
  prompt: `You produce top-down game assets. Describe each asset you make; if the brief
cannot be met, call fail_asset with the reason.`,
  tools: ['fail_asset'],
});
