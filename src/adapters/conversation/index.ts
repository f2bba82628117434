/**
 * The ground floor of every face (docs/architecture.md): one recorded conversation, its
 * messages, its error, and the stream plumbing a face records a streamed reply with.
 */
export {
  createConversation,
  openConversation,
  type Conversation,
  type ConversationOptions,
  type Face,
  type OpenConversationOptions,
  type Reply,
  type Step,
  type TurnCall,
} from './conversation';
export {
  ConversationError,
  DropInError,
  ShapeError,
  recoveryFailed,
  serverState,
  type ConversationErrorCode,
  type DropInErrorCode,
  type ShapeErrorCode,
} from './errors';
export { callsOf, canonicalArguments, chatTool, fingerprint, isEmptyReply, joinedText, jsonCopy, messageOf, type ConversationMessage } from './messages';
export { callsHave, pairingProblem, type PairingProblem, type PairingStep } from './pairing';
export { firstNewMessage } from './reconcile';
export { forward, recordingStream, recordStream, type StreamHooks } from './stream';
