// A helper module: constants the definitions share.
export const TONE = 'Be brief.';
export const shared = { tools: ['lookup', 'refund'], temperature: 0.4 };
