//! Text in any language: typed through the companion keyboard, ADBKeyBoard or plain
//! `input text`, read back exactly, with the user's keyboard restored.
