//! `RefCell` for the wasm build: std's, whose `borrow` and `borrow_mut`
//! take their caller's location for the panic of a conflicting borrow. Each
//! call site then has a location record of its own in the module (file,
//! line, column: some 80 of them), which nothing reads: a panic in the wasm
//! aborts with `unreachable` and prints nothing. Here every borrow's panic
//! has the one location of this file. Native builds (the tests) keep std's
//! `RefCell`, so that a conflicting borrow there names its caller.

#[cfg(not(target_arch = "wasm32"))]
pub use std::cell::RefCell;

#[cfg(target_arch = "wasm32")]
pub use shared_location::RefCell;

#[cfg(target_arch = "wasm32")]
mod shared_location {
    use std::cell::{Ref, RefMut};

    /// std's `RefCell` with `borrow` and `borrow_mut` that do not take
    /// their caller's location; its other methods through `Deref`.
    #[derive(Default)]
    pub struct RefCell<T>(std::cell::RefCell<T>);

    impl<T> RefCell<T> {
        pub const fn new(value: T) -> Self {
            RefCell(std::cell::RefCell::new(value))
        }

        #[inline(always)]
        pub fn borrow(&self) -> Ref<'_, T> {
            self.0.borrow()
        }

        #[inline(always)]
        pub fn borrow_mut(&self) -> RefMut<'_, T> {
            self.0.borrow_mut()
        }
    }

    impl<T> From<T> for RefCell<T> {
        fn from(value: T) -> Self {
            RefCell::new(value)
        }
    }

    impl<T> std::ops::Deref for RefCell<T> {
        type Target = std::cell::RefCell<T>;

        fn deref(&self) -> &Self::Target {
            &self.0
        }
    }

    impl<T> std::ops::DerefMut for RefCell<T> {
        fn deref_mut(&mut self) -> &mut Self::Target {
            &mut self.0
        }
    }
}
