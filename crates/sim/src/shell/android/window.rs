//! The screen as the window manager, display manager, input manager and SurfaceFlinger describe
//! it: the focused window and app (`mCurrentFocus`, `mFocusedApp`), the keyguard (never shown:
//! the simulated phone has no lock screen), the display's size, density and rotation (always
//! portrait).
use std::fmt::Write;

use crate::device::{Device, Frame, Phase};
use crate::view::{DENSITY, HEIGHT, NAV_BAR_TOP, WIDTH};

/// The physical display id SurfaceFlinger reports.
const DISPLAY_ID: u64 = 4_619_827_259_835_644_672;

/// A frame's package, fully qualified activity and short component (`pkg/.Name`).
pub(super) fn names(dev: &Device, f: &Frame) -> (String, String, String) {
    let Some(app) = dev.apps.apps.get(f.app) else {
        return Default::default();
    };
    let act = app
        .screens
        .get(f.screen)
        .map_or("", |s| s.activity.as_str());
    let full = if act.starts_with('.') {
        format!("{}{act}", app.package)
    } else {
        act.to_owned()
    };
    let short = super::intent::short_component(&format!("{}/{full}", app.package));
    (app.package.clone(), full, short)
}

/// The identity hash Android prints for a frame's ActivityRecord (`+1` for its window).
/// Wrapping: a frame opened from a record carries the record's id, which may be a 52-bit hash
/// (a file's), so the sum can pass `u32::MAX`.
pub(super) fn record_hash(f: &Frame) -> u32 {
    0x5c3a_2b10_u32
        .wrapping_add((f.app as u32).wrapping_mul(0x1_0010))
        .wrapping_add((f.screen as u32).wrapping_mul(0x100))
        .wrapping_add(f.item.map_or(0, |i| (i as u32).wrapping_add(1)))
}

/// The task a frame's app runs in.
pub(super) fn task_of(dev: &Device, f: &Frame) -> u32 {
    dev.procs.get(f.app).map_or(1, |p| p.task)
}

/// `ActivityRecord{hash u0 pkg/.Act tN}`.
pub(super) fn record(dev: &Device, f: &Frame) -> String {
    let (_, _, short) = names(dev, f);
    format!(
        "ActivityRecord{{{:x} u0 {short} t{}}}",
        record_hash(f),
        task_of(dev, f)
    )
}

fn focus_lines(dev: &Device) -> String {
    let top = dev.top();
    let (package, full, _) = names(dev, &top);
    let phase = dev.phase();
    // While an app starts, its starting window has the focus; the app is already the focused
    // app. A window animation shows as a running app transition.
    let window = if phase == Phase::Starting {
        format!("Splash Screen {package}")
    } else {
        format!("{package}/{full}")
    };
    let transition = if matches!(phase, Phase::Starting | Phase::Sliding { .. }) {
        "APP_STATE_RUNNING"
    } else {
        "APP_STATE_IDLE"
    };
    format!(
        "  mCurrentFocus=Window{{{:x} u0 {window}}}\n  mFocusedApp={}\n  mAppTransitionState={transition}\n",
        record_hash(&top) + 1,
        record(dev, &top)
    )
}

fn policy() -> String {
    "WINDOW MANAGER POLICY STATE (dumpsys window policy)\n    mSafeMode=false mSystemReady=true mSystemBooted=true\n    mLidState=LID_ABSENT mLidOpenRotation=-1 mCameraLensCoverState=CAMERA_LENS_COVER_ABSENT mHdmiPlugged=false\n    mScreenOnEarly=true mScreenOnFully=true\n    mKeyguardDrawComplete=true mWindowManagerDrawComplete=true\n    mDockMode=EXTRA_DOCK_STATE_UNDOCKED mLidKeyboardAccessibility=0 mLidNavigationAccessibility=0\n    KeyguardServiceDelegate\n      showing=false\n      inputRestricted=false\n      occluded=false\n      secure=false\n      dreaming=false\n      systemIsReady=true\n      deviceHasKeyguard=true\n      enabled=true\n      offReason=OFF_BECAUSE_OF_USER\n      currentUser=0\n      bootCompleted=true\n      screenState=SCREEN_STATE_ON\n      interactiveState=INTERACTIVE_STATE_AWAKE\n      KeyguardStateMonitor\n        mIsShowing=false\n        mSimSecure=false\n        mInputRestricted=false\n        mTrusted=false\n        mCurrentUserId=0\n".into()
}

fn displays(dev: &Device) -> String {
    format!(
        "WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)\n  Display: mDisplayId=0 rootTasks=2\n    init={WIDTH}x{HEIGHT} {DENSITY}dpi base={WIDTH}x{HEIGHT} {DENSITY}dpi cur={WIDTH}x{HEIGHT} app={WIDTH}x{NAV_BAR_TOP} rng={WIDTH}x{}-{HEIGHT}x{}\n    deferred=false mLayoutNeeded=false mTouchExcludeRegion=SkRegion((0,0,{WIDTH},{HEIGHT}))\n    mDisplayInfo=DisplayInfo{{\"Built-in Screen\", displayId 0, real {WIDTH} x {HEIGHT}, rotation 0, density {DENSITY}, state ON}}\n    mRotation=0 mCurrentRotation=ROTATION_0\n{}",
        HEIGHT - 1362,
        NAV_BAR_TOP + 84,
        focus_lines(dev)
    )
}

fn windows(dev: &Device) -> String {
    let mut out = String::from("WINDOW MANAGER WINDOWS (dumpsys window windows)\n");
    let mut n = 0;
    let mut add = |out: &mut String, hash: u32, title: &str, task: u32| {
        let _ = write!(
            out,
            "  Window #{n} Window{{{hash:x} u0 {title}}}:\n    mDisplayId=0 rootTaskId={task} mSession=Session{{{:x} 1602:u0a10150}} mClient=android.os.BinderProxy@{:x}\n    mHasSurface=true isReadyForDisplay()=true mWindowRemovalAllowed=false\n",
            hash ^ 0xabc,
            hash ^ 0x1357
        );
        n += 1;
    };
    add(&mut out, 0x0b4d_e117, "StatusBar", 1);
    add(&mut out, 0x0c0f_f331, "NavigationBar0", 1);
    if dev.keyboard {
        add(&mut out, 0x01b2_c3d4, "InputMethod", 1);
    }
    for f in dev.stack.iter().rev() {
        let (package, full, _) = names(dev, f);
        add(
            &mut out,
            record_hash(f) + 1,
            &format!("{package}/{full}"),
            task_of(dev, f),
        );
    }
    let ime = if dev.keyboard {
        "Window{1b2c3d4 u0 InputMethod}"
    } else {
        "null"
    };
    let _ = write!(
        out,
        "\n  mGlobalConfiguration={{1.0 ?mcc?mnc [en_US] ldltr sw411dp w411dp h866dp {DENSITY}dpi nrml long port finger -keyb/v/h -nav/h winConfig={{ mBounds=Rect(0, 0 - {WIDTH}, {HEIGHT}) mAppBounds=Rect(0, 0 - {WIDTH}, {NAV_BAR_TOP}) mWindowingMode=fullscreen mDisplayWindowingMode=fullscreen mActivityType=undefined mAlwaysOnTop=undefined mRotation=ROTATION_0}} s.1}}\n  mHasPermanentDpad=false\n  mTopFocusedDisplayId=0\n  imeLayeringTarget in display# 0 {}\n  mInputMethodWindow={ime}\n{}",
        if dev.keyboard { "Window" } else { "null" },
        focus_lines(dev)
    );
    out
}

/// `dumpsys window [policy|displays|windows]`; all three without a section.
pub(super) fn window(dev: &Device, section: Option<&str>) -> String {
    match section {
        Some("policy" | "p") => policy(),
        Some("displays" | "d") => displays(dev),
        Some("windows" | "w") => windows(dev),
        _ => format!("{}\n{}\n{}", policy(), displays(dev), windows(dev)),
    }
}

/// `dumpsys display`: the viewport and display info tools read size and rotation from.
pub(super) fn display() -> String {
    format!(
        "DISPLAY MANAGER (dumpsys display)\n  mOnlyCode=false\n  mSafeMode=false\n  mPendingTraversal=false\n  mViewports=[DisplayViewport{{type=INTERNAL, valid=true, isActive=true, displayId=0, uniqueId='local:{DISPLAY_ID}', physicalPort=0, orientation=0, logicalFrame=Rect(0, 0 - {WIDTH}, {HEIGHT}), physicalFrame=Rect(0, 0 - {WIDTH}, {HEIGHT}), deviceWidth={WIDTH}, deviceHeight={HEIGHT}}}]\n\nDisplay Devices: size=1\n  DisplayDeviceInfo{{\"Built-in Screen\": uniqueId=\"local:{DISPLAY_ID}\", {WIDTH} x {HEIGHT}, modeId 1, renderFrameRate 60.0, defaultModeId 1, density {DENSITY}, {DENSITY}.0 x {DENSITY}.0 dpi, touch INTERNAL, rotation 0, type INTERNAL, address {{port=0, model=0x0}}, state ON, FLAG_DEFAULT_DISPLAY, FLAG_ROTATES_WITH_CONTENT, FLAG_SECURE, FLAG_SUPPORTS_PROTECTED_BUFFERS}}\n\nLogical Displays: size=1\n  Display 0:\n    mDisplayId=0\n    mLayerStack=0\n    mPrimaryDisplayDevice=Built-in Screen\n    mBaseDisplayInfo=DisplayInfo{{\"Built-in Screen\", displayId 0, displayGroupId 0, FLAG_SECURE, FLAG_SUPPORTS_PROTECTED_BUFFERS, FLAG_TRUSTED, real {WIDTH} x {HEIGHT}, largest app {HEIGHT} x {HEIGHT}, smallest app {WIDTH} x {WIDTH}, appVsyncOff 0, presDeadline 16666666, mode 1, defaultMode 1, rotation 0, state ON, type INTERNAL, uniqueId \"local:{DISPLAY_ID}\", app {WIDTH} x {NAV_BAR_TOP}, density {DENSITY} ({DENSITY}.0 x {DENSITY}.0) dpi}}\n"
    )
}

/// `dumpsys input`: the touchscreen's viewport and surface orientation.
pub(super) fn input() -> String {
    format!(
        "INPUT MANAGER (dumpsys input)\n\nInput Manager Service (Java) State:\n  Keyboard Backlight Controller:\n\nEvent Hub State:\n  BuiltInKeyboardId: -2\n  Devices:\n    3: sim_touchscreen\n      Classes: TOUCH | TOUCH_MT\n\nInput Reader State (Nums of device: 1):\n  Device 3: sim_touchscreen\n    Sources: TOUCHSCREEN\n    Touch Input Mapper (mode - DIRECT):\n      Viewport INTERNAL: displayId=0, uniqueId=local:{DISPLAY_ID}, port=0, orientation=0, logicalFrame=[0, 0, {WIDTH}, {HEIGHT}], physicalFrame=[0, 0, {WIDTH}, {HEIGHT}], deviceSize=[{WIDTH}, {HEIGHT}], isActive=[1]\n      RawSurfaceWidth: {WIDTH}px\n      RawSurfaceHeight: {HEIGHT}px\n      SurfaceOrientation: 0\n      DisplayWidth: {WIDTH}px\n      DisplayHeight: {HEIGHT}px\n"
    )
}

/// `dumpsys SurfaceFlinger --display-id`; other SurfaceFlinger dumps only name the display.
pub(super) fn surface_flinger() -> String {
    format!(
        "Display {DISPLAY_ID} (HWC display 0): port=0 pnpId=DMS displayName=\"Built-in Screen\"\n"
    )
}
