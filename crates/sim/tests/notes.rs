//! The notes app keeps notes as files under /sdcard/Notes: a note created, renamed, edited and
//! deleted on its screens is what `ls` and `cat` show, and a file put there is a note the app
//! lists; the display settings change brightness and screen timeout as `settings get` reads.
use std::sync::Mutex;

use droidmesh_sim::device::Device;

use crate::screen::{phone, sh, shows, spot, tap};

fn type_into(dev: &Mutex<Device>, id: &str, text: &str) {
    tap(dev, id);
    sh(dev, &format!("input text '{}'", text.replace(' ', "%s")));
}

/// The activity in front, as `.Name` in its package.
fn activity(dev: &Mutex<Device>) -> String {
    let (package, activity) = dev.lock().unwrap().focus_component();
    activity
        .strip_prefix(&package)
        .unwrap_or(&activity)
        .to_owned()
}

#[test]
fn a_note_created_renamed_edited_and_deleted_in_the_app_is_a_file() {
    let dev = phone();
    sh(&dev, "monkey -p com.droidmesh.notes 1");
    tap(&dev, "All notes");
    tap(&dev, "New note");
    type_into(&dev, "name", "groceries.md");
    type_into(&dev, "text", "milk and eggs");
    tap(&dev, "Save");
    assert_eq!(sh(&dev, "ls /sdcard/Notes"), "groceries.md\n");
    assert_eq!(sh(&dev, "cat /sdcard/Notes/groceries.md"), "milk and eggs");
    assert_eq!(activity(&dev), ".NoteListActivity", "save closes the form");
    assert!(shows(&dev, "groceries.md"), "the list shows the new note");
    // Rename and edit: the form starts with the note's name and text.
    tap(&dev, "groceries.md");
    tap(&dev, "name");
    sh(&dev, "input keyevent 67 67");
    sh(&dev, "input text txt");
    tap(&dev, "text");
    sh(&dev, "input text '%sand%sbread'");
    tap(&dev, "Save");
    assert_eq!(activity(&dev), ".NoteListActivity");
    assert_eq!(sh(&dev, "ls /sdcard/Notes"), "groceries.txt\n");
    assert_eq!(
        sh(&dev, "cat /sdcard/Notes/groceries.txt"),
        "milk and eggs and bread"
    );
    // A file put there by a shell is a note too; deleting one note leaves the other.
    sh(&dev, "echo todo > /sdcard/Notes/other.md");
    sh(&dev, "input keyevent 4");
    tap(&dev, "All notes");
    assert!(shows(&dev, "other.md"));
    tap(&dev, "groceries.txt");
    tap(&dev, "Delete");
    assert_eq!(sh(&dev, "ls /sdcard/Notes"), "other.md\n");
    assert!(!shows(&dev, "groceries.txt"));
}

#[test]
fn a_note_without_a_name_or_over_an_existing_one_is_refused_on_screen() {
    let dev = phone();
    sh(&dev, "echo x > /sdcard/Notes/a.md");
    sh(&dev, "monkey -p com.droidmesh.notes 1");
    tap(&dev, "All notes");
    tap(&dev, "New note");
    tap(&dev, "Save");
    assert!(shows(&dev, "Could not save: Name is empty"));
    type_into(&dev, "name", "a.md");
    tap(&dev, "Save");
    assert!(shows(&dev, "Could not save: a.md already exists"));
    assert_eq!(sh(&dev, "cat /sdcard/Notes/a.md"), "x\n");
}

fn setting(dev: &Mutex<Device>, key: &str) -> String {
    sh(dev, &format!("settings get {key}")).trim().to_owned()
}

#[test]
fn the_brightness_slider_sets_screen_brightness_where_it_is_touched() {
    let dev = phone();
    sh(
        &dev,
        "am start -n com.android.settings/.display.DisplaySettings",
    );
    let (_, y, left, right) = spot(&dev, "brightness_slider");
    sh(&dev, &format!("input tap {left} {y}"));
    assert_eq!(setting(&dev, "system screen_brightness"), "0");
    assert!(shows(&dev, "0 of 255"));
    sh(&dev, &format!("input tap {} {y}", right - 1));
    assert_eq!(setting(&dev, "system screen_brightness"), "255");
    sh(&dev, &format!("input tap {} {y}", (left + right) / 2));
    let middle: i32 = setting(&dev, "system screen_brightness").parse().unwrap();
    assert!((120..=135).contains(&middle), "{middle}");
    // Dragging the slider sets it where the finger stops.
    sh(
        &dev,
        &format!("input swipe {} {y} {left} {y} 300", (left + right) / 2),
    );
    assert_eq!(setting(&dev, "system screen_brightness"), "0");
}

#[test]
fn the_screen_timeout_picker_sets_screen_off_timeout() {
    let dev = phone();
    sh(
        &dev,
        "am start -n com.android.settings/.display.DisplaySettings",
    );
    assert_eq!(setting(&dev, "system screen_off_timeout"), "60000");
    tap(&dev, "Screen timeout");
    tap(&dev, "2 minutes");
    assert_eq!(setting(&dev, "system screen_off_timeout"), "120000");
    let d = dev.lock().unwrap();
    let view = d.view();
    let checked: Vec<&str> = view
        .nodes
        .iter()
        .filter(|n| n.class == "android.widget.RadioButton" && n.checked)
        .filter_map(|n| n.parent.map(|p| view.nodes[p].resource_id.as_str()))
        .collect();
    assert_eq!(checked, ["com.android.settings:id/timeout_2m"]);
}

#[test]
fn a_note_opened_from_the_folder_shows_in_dumpsys_window() {
    // A screen opened from a file carries the file's 52-bit id; the window's identity hash
    // must not overflow on it (it panicked the shell, so the device service's observation
    // read "internal error" instead of the screen).
    let dev = phone();
    sh(&dev, "mkdir -p /sdcard/Notes");
    sh(&dev, "echo 'call the plumber' > /sdcard/Notes/plans.md");
    sh(&dev, "am start -n com.droidmesh.notes/.NoteListActivity");
    tap(&dev, "plans.md");
    let window = sh(&dev, "dumpsys window");
    assert!(
        window.contains("com.droidmesh.notes/.NoteEditActivity"),
        "{window}"
    );
}

#[test]
fn a_folder_made_in_the_app_holds_the_notes_made_in_it() {
    let dev = phone();
    sh(&dev, "echo top > /sdcard/Notes/top.md");
    sh(&dev, "monkey -p com.droidmesh.notes 1");
    tap(&dev, "All notes");
    tap(&dev, "New folder");
    type_into(&dev, "name", "Work");
    tap(&dev, "Save");
    assert_eq!(sh(&dev, "ls /sdcard/Notes"), "Work\ntop.md\n");
    assert_eq!(activity(&dev), ".NoteListActivity", "save closes the form");
    assert!(
        shows(&dev, "Work") && shows(&dev, "Folder"),
        "the list shows the folder"
    );
    tap(&dev, "Work");
    assert!(
        shows(&dev, "Work"),
        "the folder's screen is titled with its name"
    );
    assert!(!shows(&dev, "top.md"), "a folder lists only its own notes");
    tap(&dev, "New note");
    type_into(&dev, "name", "plan.md");
    type_into(&dev, "text", "ship it");
    tap(&dev, "Save");
    assert_eq!(sh(&dev, "ls /sdcard/Notes/Work"), "plan.md\n");
    assert_eq!(sh(&dev, "cat /sdcard/Notes/Work/plan.md"), "ship it");
    assert!(shows(&dev, "plan.md"), "the folder lists the new note");
    // A note of the folder opens, edits and deletes in the folder.
    tap(&dev, "plan.md");
    tap(&dev, "text");
    sh(&dev, "input text '%snow'");
    tap(&dev, "Save");
    assert_eq!(sh(&dev, "cat /sdcard/Notes/Work/plan.md"), "ship it now");
    sh(&dev, "input keyevent 4");
    assert!(
        !shows(&dev, "plan.md"),
        "the root lists no note of a folder"
    );
    tap(&dev, "Work");
    tap(&dev, "plan.md");
    tap(&dev, "Delete");
    assert_eq!(sh(&dev, "ls /sdcard/Notes/Work"), "");
}

#[test]
fn a_folder_without_a_name_or_over_an_existing_one_is_refused_on_screen() {
    let dev = phone();
    sh(&dev, "mkdir -p /sdcard/Notes/Work");
    sh(&dev, "monkey -p com.droidmesh.notes 1");
    tap(&dev, "All notes");
    tap(&dev, "New folder");
    tap(&dev, "Save");
    assert!(shows(&dev, "Could not save: Folder name is empty"));
    type_into(&dev, "name", "Work");
    tap(&dev, "Save");
    assert!(shows(&dev, "Could not save: Work already exists"));
    type_into(&dev, "name", "/x");
    tap(&dev, "Save");
    assert!(shows(
        &dev,
        "Could not save: 'Work/x' is not a file name (no '/', not empty)"
    ));
    assert_eq!(sh(&dev, "ls /sdcard/Notes"), "Work\n");
}

#[test]
fn a_note_moved_to_a_folder_is_a_file_in_that_folder() {
    let dev = phone();
    sh(&dev, "mkdir -p /sdcard/Notes/Work");
    sh(&dev, "echo plan > /sdcard/Notes/plan.md");
    sh(&dev, "monkey -p com.droidmesh.notes 1");
    tap(&dev, "All notes");
    tap(&dev, "plan.md");
    type_into(&dev, "move", "Home");
    tap(&dev, "Move");
    assert!(shows(
        &dev,
        "Could not save: there is no folder Home in Notes"
    ));
    tap(&dev, "move");
    sh(&dev, "input keyevent 67 67 67 67");
    sh(&dev, "input text Work");
    tap(&dev, "Move");
    assert_eq!(sh(&dev, "ls /sdcard/Notes"), "Work\n");
    assert_eq!(sh(&dev, "cat /sdcard/Notes/Work/plan.md"), "plan\n");
    assert!(!shows(&dev, "plan.md"), "the root no longer lists the note");
}
