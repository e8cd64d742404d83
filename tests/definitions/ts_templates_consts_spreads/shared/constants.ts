// Outside agents/: constants the whole project shares.
export const COMPANY: string = 'Acme';
export const TONE = `You speak for ${COMPANY}. Be brief and kind.`;
