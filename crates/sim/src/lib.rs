//! A simulated Android device that speaks the device side of the ADB protocol over TCP.
