//! The device service: DeviceService over adb_client, with leases, UI state and screenshots.
